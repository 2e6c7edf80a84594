"""Running the Alembic migrations from code (the CLI migrates its embedded SQLite on first use)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

__all__ = ["MIGRATIONS", "SCHEMA_HEAD", "alembic_config", "current_revision", "downgrade", "upgrade"]

# The top-level migrations/ folder, installed as the package litehit.migrations (pyproject.toml).
MIGRATIONS = Path(str(files("litehit.migrations")))


def _default_url() -> str:
    from litehit.settings import get_settings  # pydantic-settings is loaded only when needed

    return get_settings().db_url


SCHEMA_HEAD = "0011"  # the newest revision in migrations/versions (a test keeps them equal)


if TYPE_CHECKING:
    from alembic.config import Config


def alembic_config(url: str | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", (url or _default_url()).replace("%", "%%"))
    return cfg


def upgrade(url: str | None = None, revision: str = "head") -> None:
    from alembic import command

    from litehit.db.session import ensure_sqlite_dir

    url = url or _default_url()
    ensure_sqlite_dir(url)

    command.upgrade(alembic_config(url), revision)


def downgrade(url: str | None = None, revision: str = "base") -> None:
    from alembic import command

    command.downgrade(alembic_config(url), revision)


def current_revision(url: str | None = None) -> str | None:
    """The database's Alembic revision, or None when it has no schema yet."""
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    from litehit.db.session import get_engine

    try:
        with get_engine(url or _default_url()).connect() as conn:
            value = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except DBAPIError:  # no version table yet: a new database
        return None
    return None if value is None else str(value)
