"""Drydock: the shared library of every Drydock service."""

__version__ = "0.1.0"
