"""The tools gate: tool calls parsed, none leaked as text."""
