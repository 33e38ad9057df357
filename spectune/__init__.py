"""spectune: tune speculative decoding's draft length from a roofline cost model."""

__version__ = "0.1.0"
