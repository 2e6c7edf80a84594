"""The Alembic migrations of LiteHit's database, shipped inside the package as ``litehit.migrations``."""
