"""The curve gate: per-user tok/s and TTFT at N concurrent users."""
