"""Persistent state: SQLAlchemy tables, sessions and Alembic migrations."""

# Every table module registers on the shared metadata when the package is imported, so that
# migrations and schema checks always see the whole schema.
from corral.head.store import serving_tables as serving_tables
