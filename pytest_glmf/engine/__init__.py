"""Talking to a running engine: the HTTP client, readiness and introspection."""
