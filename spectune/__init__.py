"""spectune: tune speculative decoding's draft length from a roofline cost model."""

from spectune.version import __version__

__all__ = ["__version__"]
