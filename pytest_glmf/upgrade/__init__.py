"""`glmf upgrade`: what a new engine version changes for your lanes, before a GPU boots (cli.py)."""
