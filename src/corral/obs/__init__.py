"""Logging setup and metric names."""
