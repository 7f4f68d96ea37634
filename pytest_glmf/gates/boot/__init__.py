"""The boot gate: facts parsed from the server's boot log (seats, cap reason, KV pools)."""
