"""One declaration per name: a list that appears in C, Python, the CLI and the API (policies, job
kinds, trace formats, result fields) is declared once; every other spelling of it is generated
from that declaration or held equal to it here."""

from __future__ import annotations

import argparse
from typing import Any, get_args

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

from litehit.db.models import Job, ProfileRow, QuerySummary
from litehit.jobs.base import TraceKind
from litehit.jobs.kinds import Kind
from litehit.jobs.registry import job_kind, kinds, trace_kinds
from litehit.settings import Settings


def _subcommand(name: str) -> argparse.ArgumentParser:
    from litehit.cli import full_parser

    parser = full_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = sub.choices[name]
    return found


def _option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action:
    return next(a for a in parser._actions if flag in a.option_strings)


# --- eviction policies: the C codes, Python, the CLI, the API ---


def test_policy_names_are_the_c_simulators_policies() -> None:
    import core_c
    from core_c.policy import POLICIES
    from litehit.policies.options import POLICY_NAMES, PolicyName

    assert tuple(POLICIES) == POLICY_NAMES == get_args(PolicyName)
    assert len(set(POLICIES.values())) == len(POLICIES)  # distinct LH_POLICY_* codes
    for name in POLICY_NAMES:  # the C simulator knows every one of them
        with core_c.PolicySim(name, 4) as sim:
            assert sim.policy == name


def test_the_cli_and_the_api_offer_exactly_the_policies(tmp_path: Any) -> None:
    from api.main import create_app
    from litehit.policies.options import POLICY_NAMES

    assert _option(_subcommand("policies"), "--policies").default == ",".join(POLICY_NAMES)
    for name in POLICY_NAMES:
        assert name in str(_option(_subcommand("window"), "--policy").help)
    doc = create_app(Settings(home=tmp_path), enqueue=lambda *a: None).openapi()
    schemas = doc["components"]["schemas"]
    assert schemas["SweepOptions"]["properties"]["policies"]["items"]["enum"] == list(POLICY_NAMES)
    assert schemas["WindowOptions"]["properties"]["policy"]["enum"] == list(POLICY_NAMES)


# --- job kinds: the registry, SQL, the tasks, the routes, the CLI ---


def test_every_kind_has_its_module_and_one_declaration() -> None:
    assert [k.kind for k in kinds()] == list(Kind)
    for kind in Kind:
        declared = job_kind(kind)
        assert declared.kind is kind and job_kind(kind.value) is declared
    assert len({k.route for k in kinds()}) == len(Kind)  # one resource each
    assert len({k.tasks for k in kinds()}) == len(Kind)  # one task prefix each
    assert max(len(k.value) for k in Kind) <= Job.__table__.c.kind.type.length  # type: ignore[attr-defined]
    with pytest.raises(ValueError):
        job_kind("tiers_of_nothing")


def test_the_celery_tasks_are_every_stage_of_every_kind() -> None:
    from litehit.jobs.stages import stage_functions
    from worker.tasks import TASKS

    assert set(TASKS) == set(stage_functions())
    for kind in kinds():
        assert kind.first_task in TASKS
        assert set(kind.stage_tasks().values()) <= set(TASKS)  # what the recovery sweep re-sends
        if isinstance(kind, TraceKind):
            assert kind.part_task_name in TASKS and kind.part_stage is not None


def test_the_api_has_one_resource_per_kind_and_lists_every_kind(tmp_path: Any) -> None:
    from api.main import create_app
    from litehit.jobs.views import JobPublic

    app = create_app(Settings(home=tmp_path), enqueue=lambda *a: None)
    paths = set(app.openapi()["paths"])
    for kind in kinds():
        base = f"/v1{kind.route}"
        assert {base, f"{base}/{{job_id}}"} <= paths
        for artifact in kind.artifacts:
            assert f"{base}/{{job_id}}/{artifact.path}" in paths
    assert [k.value for k in JobPublic.model_fields["kind"].annotation] == [k.value for k in Kind]  # type: ignore[union-attr]
    with TestClient(app) as client:
        for kind in kinds():  # an unknown state is a 422 on every list
            assert client.get(f"/v1{kind.route}?state=bogus").status_code == 422


def test_litehit_jobs_selects_every_kind() -> None:
    assert _option(_subcommand("jobs"), "--kind").choices == [k.value for k in Kind]


# --- result fields: the SQL summary tables and the views against the result models ---


def _field(model: type[BaseModel], path: tuple[str, ...]) -> Any:
    info = model.model_fields[path[0]]
    if len(path) == 1:
        return info
    assert isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel), path
    return _field(info.annotation, path[1:])


def test_profile_summary_rows_are_the_metrics_they_come_from() -> None:
    from litehit.jobs.profile import PROFILE_ROW_FIELDS, ProfileRowPublic
    from litehit.profile.result import Metrics

    identity = ["job_id", "lane", "row", "instance_id", "category"]
    assert [c.name for c in ProfileRow.__table__.columns] == [*identity, *PROFILE_ROW_FIELDS]
    assert list(ProfileRowPublic.model_fields) == [*identity[1:2], *identity[3:], *PROFILE_ROW_FIELDS]
    for column, path in PROFILE_ROW_FIELDS.items():
        source = _field(Metrics, path).annotation
        public = ProfileRowPublic.model_fields[column].annotation
        assert public == source, (column, public, source)
        nullable = ProfileRow.__table__.c[column].nullable
        assert nullable == (type(None) in get_args(source)), column


def test_views_derived_from_a_result_name_real_fields() -> None:
    for kind in trace_kinds():
        if kind.view_paths is None:
            for name in kind.result_model().model_fields:  # shown as they are
                assert name in kind.part_view_model.model_fields
            continue
        for name, (path, _) in kind.view_paths.items():
            source = _field(kind.result_model(), path)
            shown = kind.part_view_model.model_fields[name]
            assert shown.description == source.description


def test_query_summary_rows_hold_a_summary_per_slot() -> None:
    from litehit.jobs.query import SummaryPublic

    per_slot = {"total_hit_blocks", "total_hit_tokens"}
    columns = {c.name for c in QuerySummary.__table__.columns}
    assert per_slot | {"requests", "total_input_tokens", "capacity_gb", "capacity"} <= columns
    assert per_slot | {"requests", "total_input_tokens", "capacity_gb"} <= set(SummaryPublic.model_fields)


# --- trace formats: the C table and its plain-Python copy ---


def test_the_format_table_copy_equals_the_c_table() -> None:
    from core_c.scan import TRACE_FORMATS
    from litehit.spec import TraceFormat
    from litehit.traces.format_table import FORMATS

    assert [(f.name, f.default_trace_block, f.instanceless, f.detect_keys, f.detect_priority) for f in FORMATS] == [
        (f.name, f.default_trace_block, f.instanceless, f.detect_keys, f.detect_priority) for f in TRACE_FORMATS
    ]
    assert {f.name for f in FORMATS} == {f.value for f in TraceFormat}
