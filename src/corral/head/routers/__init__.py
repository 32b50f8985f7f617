"""Thin HTTP endpoints; the work happens in corral.head.services."""
