"""Known-truth servers for calibrating the plugin's own measurements (used by tests/ and bench/)."""
