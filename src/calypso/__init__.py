"""Calypso: a self-hosted grounded-answer server."""

__version__ = "0.1.0"
