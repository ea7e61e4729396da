"""The library's version (one place: pyproject.toml reads it from here)."""

__version__ = "0.3.0"
