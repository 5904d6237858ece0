"""Trek: where and why search-augmented LLMs fail on fast-changing facts."""

__version__ = "0.1.0"
