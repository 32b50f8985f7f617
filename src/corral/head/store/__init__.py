"""Persistent state: SQLAlchemy tables, sessions and Alembic migrations."""
