"""Preflight: a lane's command line checked by the engine's own parser before the server starts.

`probe.py` runs inside the engine's environment (stdlib only); the rest of this package decides
where to run it (the image, the process lane's interpreter), caches its verdict and turns it into
the one line a user reads.
"""
