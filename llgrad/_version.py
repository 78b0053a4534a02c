"""The package version (one place: the package, the cache layout and the CLI read it)."""

__version__ = "0.1.0"
