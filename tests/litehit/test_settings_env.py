"""litehit.settings reads the environment by pydantic-settings' rules without importing it: the
same values, or the same validation errors, as a pydantic-settings BaseSettings of the same
fields and configuration (env_prefix LITEHIT_, env_file .env, env_ignore_empty, extra ignore)
built here as the reference, over variables and .env files in any case, empty or invalid."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from litehit import settings as lhs


class Settings(BaseSettings, lhs._Fields):  # the reference (its name titles its validation errors)
    model_config = SettingsConfigDict(env_prefix="LITEHIT_", env_file=".env", env_ignore_empty=True, extra="ignore")


Reference = Settings


FIELDS = ["record_jobs", "queue", "home", "database_url", "max_body_bytes", "heartbeat_s", "online_urls"]
VALUES = ["", "0", "1", "no", "yes", "maybe", "x", "~/h", "/tmp/a b", "postgres://u@h/d", "12", "-3", "2.5", "nan"]


def _spelling(name: str, case: int) -> str:
    full = "LITEHIT_" + name.upper()
    return [full, full.lower(), full.title()][case]


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name in list(os.environ):
        if name.upper().startswith("LITEHIT_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def _outcome(cls: type, kwargs: dict[str, Any]) -> Any:
    try:
        return repr(cls(**kwargs).model_dump())  # (repr: NaN equals itself)
    except ValidationError as exc:  # the same fields fail for the same reasons, under the same title
        return exc.title, [(e["loc"], e["type"], e["input"]) for e in exc.errors()]


assignment = st.tuples(st.sampled_from(FIELDS), st.integers(0, 2), st.sampled_from(VALUES))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    env=st.lists(assignment, max_size=5),
    dotenv=st.none() | st.lists(assignment | st.sampled_from(["OTHER=1", "# c", "LITEHIT_QUEUE", "export X=2"])),
    kwargs=st.dictionaries(st.sampled_from(["queue", "home", "max_body_bytes"]), st.sampled_from(["k", "7", "0"])),
)
def test_the_same_settings_as_pydantic_settings(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, env: list[Any], dotenv: list[Any] | None, kwargs: dict[str, str]
) -> None:
    with monkeypatch.context() as m:
        for name, case, value in env:
            m.setenv(_spelling(name, case), value)
        env_file = clean_env / ".env"
        if dotenv is None:
            env_file.unlink(missing_ok=True)
        else:
            lines = [a if isinstance(a, str) else f"{_spelling(a[0], a[1])}={a[2]!r}" for a in dotenv]
            env_file.write_text("\n".join(lines) + "\n")
        assert _outcome(lhs.Settings, kwargs) == _outcome(Reference, kwargs)


def test_variables_win_over_the_env_file_and_keywords_over_both(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (clean_env / ".env").write_text("LITEHIT_QUEUE=file\nLITEHIT_HEARTBEAT_S=3.5\nlitehit_record_jobs=false\n")
    monkeypatch.setenv("LITEHIT_QUEUE", "variable")
    s = lhs.Settings()
    assert (s.queue, s.heartbeat_s, s.record_jobs) == ("variable", 3.5, False)
    assert lhs.Settings(queue="keyword").queue == "keyword"
    monkeypatch.setenv("LITEHIT_QUEUE", "")  # empty: ignored, so the file's value counts
    assert lhs.Settings().queue == "file"
