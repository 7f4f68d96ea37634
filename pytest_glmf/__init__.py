"""pytest-glmf: turn an LLM-serving recipe into acceptance tests."""

__version__ = "0.1.0"
