"""The package version (one place; pyproject.toml carries the same string, checked by tests/test_import.py)."""

__version__ = "0.2.0"
