"""What scripts/compose-test reads from this machine to build its stand-in images: the Debian
mirror of apt's sources (one-line .list and deb822 .sources files, options, disabled stanzas,
deb-src and other releases skipped) and the package index pip is configured with (only an
http(s) index is usable in a container)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from service_fixtures import ROOT

SCRIPT = ROOT / "scripts" / "compose-test"


def run(*args: str, env: dict[str, str]) -> str:
    out = subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True, check=True, timeout=60)
    assert out.stderr == ""
    return out.stdout.strip()


def apt_mirror(apt: Path, release: str = "bookworm") -> str:
    return run("--apt-mirror", release, env={**os.environ, "LITEHIT_APT_ETC": str(apt)})


def test_the_mirror_comes_from_one_line_sources_with_options(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(
        "# deb http://commented.test/debian bookworm main\n"
        "deb-src http://source.test/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://mirror.test/debian bookworm main contrib\n"
        "deb http://mirror.test/debian-security bookworm-security main\n"
    )
    assert apt_mirror(tmp_path) == "http://mirror.test/debian"
    assert apt_mirror(tmp_path, "bookworm-security") == "http://mirror.test/debian-security"
    assert apt_mirror(tmp_path, "trixie") == ""


def test_the_mirror_comes_from_deb822_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n"
        "URIs: http://off.test/debian\n"
        "Suites: bookworm\n"
        "Components: main\n"
        "Enabled: no\n"
        "\n"
        "Types: deb-src\n"
        "URIs: http://source.test/debian\n"
        "Suites: bookworm\n"
        "\n"
        "Types: deb deb-src\n"
        "# http://snapshot.test/archive/debian/20250520T000000Z\n"
        "URIs: https://first.test/debian https://second.test/debian\n"
        "Suites: bookworm bookworm-updates\n"
        "Components: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )
    (tmp_path / "sources.list.d" / "other.list.disabled").write_text("deb http://ignored.test/debian bookworm main\n")
    assert apt_mirror(tmp_path) == "https://first.test/debian"
    assert apt_mirror(tmp_path, "bookworm-updates") == "https://first.test/debian"
    assert apt_mirror(tmp_path, "bookworm-security") == ""


def test_the_pip_index_is_passed_only_when_a_container_can_use_it(tmp_path: Path) -> None:
    env = {**os.environ, "PIP_CONFIG_FILE": str(tmp_path / "pip.conf")}
    env.pop("PIP_INDEX_URL", None)
    (tmp_path / "pip.conf").write_text("[global]\nindex-url = https://index.test/simple\n")
    assert run("--pip-index", env=env) == "https://index.test/simple"
    assert run("--pip-index", env={**env, "PIP_INDEX_URL": "http://env.test/simple"}) == "http://env.test/simple"
    assert run("--pip-index", env={**env, "PIP_INDEX_URL": "file:///opt/pypi/simple"}) == ""
