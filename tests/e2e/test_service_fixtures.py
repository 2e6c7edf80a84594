"""The test harness itself: what counts as CI, and which environment the suite keeps."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from service_fixtures import ROOT, running_in_ci


@pytest.mark.parametrize("value", ["true", "TRUE", "True", "1", "yes", "YES", " true "])
def test_ci_is_true_1_or_yes(value: str) -> None:
    assert running_in_ci({"CI": value}) is True


@pytest.mark.parametrize("value", ["false", "FALSE", "0", "no", "", "off", "2"])
def test_other_ci_values_are_not_ci(value: str) -> None:
    assert running_in_ci({"CI": value}) is False


def test_no_ci_variable_is_not_ci() -> None:
    assert running_in_ci({}) is False


def test_the_suite_keeps_its_own_settings_and_drops_litehit_settings(tmp_path: Path) -> None:
    """conftest.py removes LiteHit's LITEHIT_* settings but keeps LITEHIT_TEST_* (read by the
    fixtures after conftest.py ran): a pytest child process with both set sees only the latter."""
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_probe.py").write_text(
        "import os\n"
        "\n"
        "import service_fixtures\n"
        "\n"
        "\n"
        "def test_probe():\n"
        "    assert service_fixtures.PG_ADMIN == 'postgresql://probe@127.0.0.1:1/probe'\n"
        "    assert 'LITEHIT_DATABASE_URL' not in os.environ\n"
        "    assert os.environ['LITEHIT_HOME'] != '/nonexistent/probe-home'\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "tests" / "support"),
        "LITEHIT_TEST_PG": "postgresql://probe@127.0.0.1:1/probe",
        "LITEHIT_DATABASE_URL": "sqlite:////nonexistent/probe.db",
        "LITEHIT_HOME": "/nonexistent/probe-home",
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
