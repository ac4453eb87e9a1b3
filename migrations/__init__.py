"""Alembic environment and versions; shipped in the wheel as ``perfci.migrations``."""
