"""Totals that mean something in the API's query view: lanes of different setups (block size,
block bytes, TTL) share no total, so a query over a fanout replay has one total per setup, each
the plain sum over its lanes, and no total across setups; a one-setup replay keeps its total.
And the replay config's KV-bytes fields (an instance group's ``model``) over HTTP."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from helpers import instance
from sqlalchemy import select
from test_service_api import upload, wait_job

from litehit.cli import main
from litehit.db.models import QuerySummary
from litehit.db.session import session_scope
from litehit.query import parse_capacities, query_facts
from litehit.settings import Settings

pytestmark = pytest.mark.service

CAPS = ["1", "16", "300blocks", "1Mtokens", "-1"]
MIXED: dict[str, Any] = {
    "block_size": 512,
    "fanout_all_instances": True,
    "instance_groups": [{"name": "g"}, {"name": "t60", "ttl_seconds": 60}],
    "instances": [
        instance("b512", 512, group="g", sizes=(1 << 20,)),
        instance("b1024", 1024, group="g", sizes=(1 << 21,)),
        instance("b512_ttl60", 512, group="t60", sizes=(1 << 20,)),
        instance("b512_copy", 512, group="g", sizes=(1 << 19, 1 << 19)),  # b512's setup: same bytes per block
        instance("b512_big", 512, group="g", sizes=(1 << 22,)),  # 512 tokens, 4 MiB per block: its own setup
    ],
}


def _naive_total(lines: list[dict[str, Any]], lanes: list[str]) -> dict[str, Any]:
    """The sum, slot by slot, of the CLI query's instance summaries of these lanes."""
    mine = [line for line in lines if line.get("instance_id") in lanes]
    assert len(mine) == len(lanes)
    blocks = [sum(col) for col in zip(*(m["total_hit_blocks"] for m in mine), strict=True)]
    tokens = [sum(col) for col in zip(*(m["total_hit_tokens"] for m in mine), strict=True)]
    inputs = sum(m["total_input_tokens"] for m in mine)
    return {
        "requests": sum(m["requests"] for m in mine),
        "total_input_tokens": inputs,
        "total_hit_blocks": blocks,
        "total_hit_tokens": tokens,
        "hit_rates": [t / inputs for t in tokens],
    }


def _replay_and_query(api: Any, trace_id: str, config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    replay = wait_job(api, api.post("/v1/replays", json={**config, "trace_id": trace_id}).headers["location"])
    assert replay["state"] == "succeeded", replay["error"]
    r = api.post("/v1/queries", json={"replay_id": replay["id"], "capacity_gb": CAPS})
    assert r.status_code == 202, r.text
    query = wait_job(api, r.headers["location"])
    assert query["state"] == "succeeded", query["error"]
    return replay, query


def _cli_summaries(service_settings: Settings, replay: dict[str, Any]) -> list[dict[str, Any]]:
    out = io.BytesIO()
    query_facts(service_settings.storage / replay["facts"]["path"], parse_capacities(CAPS), out)
    return [json.loads(line) for line in out.getvalue().splitlines() if b'"summary":true' in line]


def test_mixed_setups_have_one_total_each_and_none_across(api: Any, data_dir: Path, service_settings: Settings) -> None:
    trace = upload(api, (data_dir / "conversation_trace.jsonl").read_bytes(), "conv.jsonl")
    replay, query = _replay_and_query(api, trace["id"], MIXED)
    assert query["total"] is None
    setups = [
        (t["block_size"], t["block_bytes"], t["ttl_seconds"], t["instances"], t["instance_id"]) for t in query["totals"]
    ]
    assert setups == [
        (512, 1 << 20, 0, ["b512", "b512_copy"], None),
        (512, 1 << 20, 60, ["b512_ttl60"], None),
        (512, 1 << 22, 0, ["b512_big"], None),
        (1024, 1 << 21, 0, ["b1024"], None),
    ]
    lines = _cli_summaries(service_settings, replay)
    for total in query["totals"]:
        expected = _naive_total(lines, total["instances"])
        assert {k: total[k] for k in expected} == expected
        assert total["capacities"] == ["1.0", "16.0", "300blocks", "1000000tokens", "-1.0"]
    # the copy is the same lane under another name: the setup's total is twice b512
    by_name = {i["instance_id"]: i for i in query["instances"]}
    assert query["totals"][0]["total_hit_blocks"] == [2 * b for b in by_name["b512"]["total_hit_blocks"]]
    with session_scope(service_settings.db_url) as session:
        keys = set(session.scalars(select(QuerySummary.instance_id).where(QuerySummary.job_id == query["id"])))
    assert "" not in keys  # no total across setups in SQL either
    assert {k for k in keys if k.startswith("block_size=")} == {
        "block_size=512,block_bytes=1048576,ttl_seconds=0",
        "block_size=512,block_bytes=1048576,ttl_seconds=60",
        "block_size=512,block_bytes=4194304,ttl_seconds=0",
        "block_size=1024,block_bytes=2097152,ttl_seconds=0",
    }
    listed = api.get("/v1/queries?limit=500").json()["items"]
    assert next(q for q in listed if q["id"] == query["id"])["totals"] == query["totals"]


def test_one_setup_keeps_its_total(api: Any, data_dir: Path, service_settings: Settings) -> None:
    trace = upload(api, (data_dir / "conversation_trace.jsonl").read_bytes(), "conv.jsonl")
    one_setup = {**MIXED, "instances": [MIXED["instances"][0], MIXED["instances"][3]]}
    replay, query = _replay_and_query(api, trace["id"], one_setup)
    lines = _cli_summaries(service_settings, replay)
    expected = _naive_total(lines, ["b512", "b512_copy"])
    assert {k: query["total"][k] for k in expected} == expected
    assert lines[-1]["total_hit_blocks"] == expected["total_hit_blocks"]  # the original's total
    [total] = query["totals"]
    assert (total["block_size"], total["block_bytes"], total["ttl_seconds"]) == (512, 1 << 20, 0)
    assert total["instances"] == ["b512", "b512_copy"]
    assert {k: total[k] for k in expected} == expected


def test_a_facts_path_query_keeps_the_total_over_all_instances(
    api: Any, data_dir: Path, service_settings: Settings
) -> None:
    trace = upload(api, (data_dir / "conversation_trace.jsonl").read_bytes(), "conv.jsonl")
    replay, _ = _replay_and_query(api, trace["id"], MIXED)
    r = api.post("/v1/queries", json={"facts_path": replay["facts"]["path"], "capacity_gb": CAPS})
    query = wait_job(api, r.headers["location"])
    assert query["state"] == "succeeded", query["error"]
    assert query["totals"] == []  # the facts hold no TTL: setups unknown
    assert query["total"]["total_hit_blocks"] == _cli_summaries(service_settings, replay)[-1]["total_hit_blocks"]


def test_a_config_with_a_model_over_http_equals_the_shorthand(
    api: Any, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = upload(api, (data_dir / "conversation_trace.jsonl").read_bytes(), "conv.jsonl")
    config = {
        "block_size": 512,
        "fanout_all_instances": True,
        "instance_groups": [{"name": "ttl0", "model": "Llama-3.1-8B"}, {"name": "ttl60", "ttl_seconds": 60}],
        "instances": [
            {"instance_group_name": "ttl0", "instance_id": "b512", "block_size": 512},
            instance("b512_ttl60", 512, group="ttl60", sizes=(131072 * 512,)),
        ],
    }
    by_config = wait_job(api, api.post("/v1/replays", json={**config, "trace_id": trace["id"]}).headers["location"])
    assert by_config["state"] == "succeeded", by_config["error"]
    assert by_config["spec"]["instance_groups"][0]["model"] == "Llama-3.1-8B"
    out = tmp_path / "cli"
    flags = ["--ttl-seconds", "0,60", "--model", "Llama-3.1-8B", "-o", str(out)]
    assert main(["replay", str(data_dir / "conversation_trace.jsonl"), *flags]) == 0
    capsys.readouterr()
    assert api.get(by_config["facts"]["url"]).content == (out / "litehit_facts.csv").read_bytes()
    bad = api.post(
        "/v1/replays",
        json={
            **config,
            "trace_id": trace["id"],
            "instance_groups": [{"name": "ttl0", "model": "gpt-2"}, {"name": "ttl60"}],
        },
    )
    assert bad.status_code == 422, bad.text
    assert [d["loc"] for d in bad.json()["error"]["details"]] == [["body", "instance_groups", 0, "model"]]


def test_the_default_kv_bytes_are_noted_on_every_view(api: Any, data_dir: Path) -> None:
    lines = (data_dir / "conversation_trace.jsonl").read_bytes().splitlines(keepends=True)[:200]
    trace = upload(api, b"".join(lines), "small.jsonl")
    assumed = wait_job(
        api, api.post("/v1/replays", json={"trace_id": trace["id"], "block_sizes": [512]}).headers["location"]
    )
    given = api.post("/v1/replays", json={"trace_id": trace["id"], "block_sizes": [512], "model": "Qwen3-8B"})
    note = "note: KV bytes per token not given: assuming 2048 B/token (give model or kv_bytes_per_token; GiB "
    assert assumed["state"] == "succeeded", assumed["error"]
    assert assumed["note"].startswith(note) and assumed["spec"]["kv_bytes_assumed"] is True
    assert given.json()["note"] is None and "kv_bytes_assumed" not in given.json()["spec"]
    query = api.post("/v1/queries", json={"replay_id": assumed["id"], "capacity_gb": [1, -1]})
    assert query.json()["note"] == assumed["note"]
    done = wait_job(api, query.headers["location"])
    assert done["note"] == assumed["note"]
    assert note.removeprefix("note: ") in api.get(f"/v1/queries/{done['id']}/report.html").text
    listed = api.get("/v1/replays?limit=500").json()["items"]
    assert next(r for r in listed if r["id"] == assumed["id"])["note"] == assumed["note"]
    profile = api.post("/v1/profiles", json={"trace_id": trace["id"], "block_sizes": [512]})
    assert profile.json()["note"] == assumed["note"]
