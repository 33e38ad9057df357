"""The package version, in a module of its own so that modules inside spectune can read it
without importing the package face (``spectune/__init__.py``, the public API)."""

__version__ = "0.1.0"
