"""Corral: a GPU cluster manager."""

__version__ = "0.1.0"
