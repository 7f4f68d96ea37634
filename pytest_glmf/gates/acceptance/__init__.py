"""The acceptance gate: speculative-decoding acceptance per prompt class."""
