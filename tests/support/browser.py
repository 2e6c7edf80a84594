"""Headless Chromium for the tests that render a page in a real browser (the report page, the API
docs): Debian's chromium, installed by apt-get when missing in CI, a skip elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from service_fixtures import running_in_ci

__all__ = ["OFFLINE", "chromium", "headless"]

OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
"""A flag that leaves the browser no host but this machine: a page that needs the internet breaks."""


def chromium() -> str:
    """Debian's chromium: installed when missing in CI, a skip elsewhere."""
    found = shutil.which("chromium")
    if found:
        return found
    if not running_in_ci():
        pytest.skip("chromium is not installed (CI installs the Debian package chromium)")
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [*sudo, "apt-get", "install", "-y", "-o", "DPkg::Lock::Timeout=120", "chromium"]
    if subprocess.run(install, env=env, check=False, timeout=1800).returncode != 0:
        subprocess.run([*sudo, "apt-get", "update", "-o", "DPkg::Lock::Timeout=120"], env=env, check=True, timeout=600)
        subprocess.run(install, env=env, check=True, timeout=1800)
    found = shutil.which("chromium")
    assert found, "apt-get installed chromium but it is not on the PATH"
    return found


def headless(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
    ]
    return subprocess.run([browser, *flags, *args], capture_output=True, text=True, check=False, timeout=180)
