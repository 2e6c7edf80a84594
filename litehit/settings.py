"""All configuration, read once from the environment (prefix LITEHIT_) by api, worker and CLI.

Every variable is documented in .env.example. With nothing set, LiteHit runs embedded: a SQLite
file and the storage root under ~/.litehit, no servers needed (the CLI). The HTTP service needs
a broker (Redis) and usually PostgreSQL.

The rules are pydantic-settings' for a BaseSettings with env_prefix LITEHIT_, env_file .env,
env_ignore_empty and extra "ignore" (tests/litehit/test_settings_env.py holds the two side by
side): keyword arguments over variables, variables over the .env file of the working directory
(read by python-dotenv, as pydantic-settings reads it), names in any case, empty values ignored,
every value validated by the fields below. They are written out here, not imported: importing
pydantic-settings (asyncio, ssl and its other sources) cost 0.10-0.15 s of a `litehit replay`'s
start-up (README, "Performance").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["ENV_PREFIX", "Settings", "get_settings"]

ENV_PREFIX = "LITEHIT_"
ENV_FILE = ".env"


class _Fields(BaseModel):
    # BaseSettings' model defaults, so validation is the same on both paths
    model_config = ConfigDict(extra="ignore", validate_default=True, arbitrary_types_allowed=True)

    home: Path = Field(default=Path.home() / ".litehit", description="base for the embedded defaults")
    storage_root: Path | None = Field(default=None, description="shared storage: uploads and job outputs")
    database_url: str | None = Field(default=None, description="SQLAlchemy URL; default sqlite under home")
    broker_url: str = "redis://127.0.0.1:6379/0"
    result_backend: str = "redis://127.0.0.1:6379/1"
    api_token: str | None = Field(default=None, description="when set, every /v1 route needs this bearer token")
    max_upload_bytes: int = 20 << 30
    max_decompressed_bytes: int = Field(
        default=256 << 30, ge=1, description="largest decompressed size of an uploaded gzip/zstd trace"
    )
    max_body_bytes: int = Field(default=4 << 20, ge=1, description="largest JSON request body (API and online owners)")
    upload_part_grace_s: float = Field(
        default=3600.0, ge=0, description="an unfinished upload file untouched this long is an orphan"
    )
    visibility_timeout_s: int = 6 * 3600
    task_soft_time_limit_s: int = 5 * 3600
    task_max_attempts: int = 3
    heartbeat_s: float = 2.0
    stale_after_s: float = 30.0
    sweep_interval_s: float = 10.0
    db_pool_size: int = Field(default=16, description="database connections per process (API request threads too)")
    db_pool_timeout_s: float = Field(
        default=10.0, gt=0, description="how long a request waits for a pooled database connection before a 503"
    )
    admission_limit: int = Field(
        default=8, ge=1, description="job submissions one API process works on at once (at most db_pool_size)"
    )
    admission_wait_s: float = Field(
        default=5.0, ge=0, description="how long a submission waits for its turn before a 503 with Retry-After"
    )
    queue: str = "litehit"
    record_jobs: bool = Field(default=True, description="the CLI records its runs in the database")
    online_snapshot_s: float = 10.0
    online_shards: int = Field(default=1, ge=1, description="number of online owner shards")
    online_shard: int = Field(default=0, ge=0, description="the shard an online owner process serves")
    online_urls: str = Field(default="", description="comma-separated owner base URLs, shard i at position i")
    attribution_shards: int = Field(default=1, ge=1, description="number of attribution owner shards")
    attribution_shard: int = Field(default=0, ge=0, description="the shard an attribution owner process serves")
    attribution_urls: str = Field(
        default="", description="comma-separated attribution owner base URLs, shard i at position i"
    )
    attribution_window_s: float = Field(
        default=120.0, gt=0, description="how long removal evidence is retained (size it with `litehit window`)"
    )
    attribution_bucket_s: float = Field(default=10.0, gt=0, description="expiry granularity of the evidence ring")
    attribution_max_lag_s: float = Field(
        default=5.0, ge=0, description="consumer lag above which a worker's lookups answer unknown"
    )
    attribution_reorder_grace_s: float = Field(
        default=1.0,
        ge=0,
        allow_inf_nan=False,
        description="how long a batch that arrives ahead of a missing seq is held for it (0: a jump is a gap at once)",
    )
    attribution_filter_bits: int = Field(
        default=1 << 22,
        ge=0,
        description="bits of each of the two generations of a worker's aged-evidence Bloom filter (0: none)",
    )
    attribution_forget_after_s: float = Field(
        default=86400.0, ge=0, description="a worker without events this long is forgotten (0: never)"
    )
    forward_limit: int = Field(
        default=64, ge=1, description="requests the API forwards to owner processes at once (in flight)"
    )
    forward_wait_s: float = Field(
        default=2.0,
        ge=0,
        allow_inf_nan=False,
        description="how long a forward waits for its turn beyond forward_limit before a 503 with Retry-After",
    )
    attribution_zmq: str = Field(
        default="", description="vLLM/SGLang KV-event endpoints to subscribe to, per worker (see README)"
    )

    @property
    def attribution_owner_urls(self) -> list[str]:
        return [u.strip().rstrip("/") for u in self.attribution_urls.split(",") if u.strip()]

    worker_metrics_port: int = Field(
        default=0, ge=0, le=65535, description="port of a Celery worker's Prometheus /metrics (0: off)"
    )

    @property
    def online_owner_urls(self) -> list[str]:
        return [u.strip().rstrip("/") for u in self.online_urls.split(",") if u.strip()]

    @field_validator("home", "storage_root")
    @classmethod
    def _expand(cls, path: Path | None) -> Path | None:
        return path.expanduser() if path is not None else None

    @field_validator("database_url")
    @classmethod
    def _driver(cls, url: str | None) -> str | None:
        """postgres:// and postgresql:// URLs use the psycopg 3 driver."""
        if url is None:
            return None
        for prefix in ("postgres://", "postgresql://"):
            if url.startswith(prefix):
                return "postgresql+psycopg://" + url[len(prefix) :]
        return url

    @property
    def storage(self) -> Path:
        return (self.storage_root or self.home / "storage").resolve()

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{(self.home / 'litehit.db').resolve()}"


def _environment() -> dict[str, Any]:
    """The values the .env file and the variables set, the variables winning (validated later,
    under the keyword arguments)."""
    values = _prefixed(_env_file())
    values.update(_prefixed(os.environ))
    return values


def _env_file() -> Mapping[str, str | None]:
    path = Path(ENV_FILE)
    if not (path.is_file() or path.is_fifo()):
        return {}
    from dotenv import dotenv_values

    return dotenv_values(path, encoding="utf-8")


def _prefixed(variables: Mapping[str, str | None]) -> dict[str, str]:
    """The fields `variables` set: names in any case (the last of a name's spellings counts),
    empty values dropped first; a name without a value (a .env line without "=") sets nothing."""
    named = {name.lower(): value for name, value in variables.items() if value != ""}
    prefix = ENV_PREFIX.lower()
    found = ((field, named.get(prefix + field)) for field in _Fields.model_fields)
    return {field: value for field, value in found if value is not None}


class Settings(_Fields):
    """The configuration: keyword arguments, else the environment (module docstring), else the
    defaults."""

    def __init__(self, **values: Any) -> None:
        super().__init__(**{**_environment(), **values})


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
