"""pytest-glmf plugin (placeholder until the plugin-core work lands)."""
