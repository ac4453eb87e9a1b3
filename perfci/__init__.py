"""perfci: catch GPU performance regressions in CI."""

__version__ = "0.1.0"

__all__ = ["__version__"]
