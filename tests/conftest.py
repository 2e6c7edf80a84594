"""Shared fixtures and paths for the LiteHit test suite.

The tests are grouped by the layer they test: core_c/ (the C engine and its binding), litehit/
(the domain library, its job kinds and the CLI), api/ (the HTTP apps in process), e2e/ (real
processes: Celery workers, the serve script, the compose stack) and project/ (the tree itself:
layers, packaging, declarations). support/ holds what they share (builders, naive oracles, the
service fixtures); every group folder is importable, so a test may reuse another's builders.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

_TESTS = Path(__file__).resolve().parent
for _folder in ("support", "core_c", "litehit", "api", "e2e", "project"):
    if str(_TESTS / _folder) not in sys.path:
        sys.path.insert(0, str(_TESTS / _folder))

# Every test (and every CLI child process) uses a private LiteHit home: the embedded SQLite
# database and storage of the machine running the tests are never touched. LITEHIT_TEST_*
# variables configure the test suite itself (e.g. LITEHIT_TEST_PG in service_fixtures.py), not
# LiteHit, so they stay.
for _name in [k for k in os.environ if k.startswith("LITEHIT_") and not k.startswith("LITEHIT_TEST_")]:
    del os.environ[_name]
os.environ["LITEHIT_HOME"] = tempfile.mkdtemp(prefix="litehit-test-home-")

import pytest  # noqa: E402 (after the environment is isolated)

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "examples" / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


from service_fixtures import api, celery_workers, postgres_url, redis_server, service_settings  # noqa: E402, F401
