"""Shared fixtures and paths for the LiteHit test suite."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "examples" / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


from service_fixtures import api, celery_workers, postgres_url, redis_server, service_settings  # noqa: E402, F401
