"""Tier splits and tier plans over HTTP, on real Celery worker processes: a replay of a small
standard trace with request categories, then ``POST /v1/tiers`` (of the replay, or of its facts
file) and ``POST /v1/plans``; tiers.json and plan.json are byte-identical to ``litehit tiers -o``
and ``litehit plan -o`` with the same options on the same facts, the job views hold the
documents' lanes, the plots are PNGs, bad bodies are 422 naming the field."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from helpers import config, group, instance, write_rows
from test_service_api import upload, wait_job

from litehit.cli import main
from litehit.settings import Settings

pytestmark = pytest.mark.service

NS = 10**9
PNG = b"\x89PNG\r\n\x1a\n"
LANES = (("s4", 4, (8192, 8192), 0), ("s8", 8, (16384, 16384), 3))  # id, block, sizes, TTL s
CONFIG: dict[str, Any] = {
    "block_size": 4,
    "trace_format": "standard",
    "instance_groups": [group(f"g-{n}", ttl, enable_prefix_hash=True) for n, _, _, ttl in LANES],
    "instances": [instance(n, b, group=f"g-{n}", sizes=s) for n, b, s, _ in LANES],
}
TIERS = [
    {"name": "hbm", "capacity": "2blocks"},
    {"name": "dram", "capacity": "128KiB", "link": "pcie-gen4"},
    {"name": "ssd", "capacity": "inf", "bandwidth_bytes_per_s": 2e9},
]
TIERS_ARGV = ["--tier", "hbm=2blocks", "--tier", "dram=128KiB", "--tier", "ssd=inf", "--link", "dram=pcie-gen4",
              "--bandwidth", "ssd=2GB/s"]  # fmt: skip
PREFILL = {"model": "Llama-3.1-8B", "gpu": "H100-SXM"}
MODEL_ARGV = ["--model", "Llama-3.1-8B", "--gpu", "H100-SXM"]
PLAN_TIERS = [
    {"name": "hbm", "capacity": "2blocks", "price_per_gib_hour": 4.0},
    {"name": "dram", "capacity": "0..256KiB", "price_per_gib_hour": 1.0},
    {"name": "ssd", "capacity": "0..inf", "price_per_gib_hour": 0.25},
]
PLAN_ARGV = ["--tier", "hbm=2blocks", "--tier", "dram=0..256KiB", "--tier", "ssd=0..inf", "--price", "hbm=4.0",
             "--price", "dram=1.0", "--price", "ssd=0.25"]  # fmt: skip
TIER_FIELDS = ("name", "capacity_blocks", "hit_blocks", "hit_tokens", "hit_rate", "cumulative_hit_rate", "bytes_loaded")


def write_trace(path: Path, seed: int) -> Path:
    """Two lanes of random prefix-tree requests; rows carry a category (chat, agent) or none."""
    rng = random.Random(seed)
    rows: list[tuple[int, int, dict[str, Any]]] = []
    for order, (name, *_rest) in enumerate(LANES):
        paths: list[list[int]] = []
        t = NS
        for i in range(80):
            if not paths or rng.random() < 0.15:
                keys = [1000 + i]
            else:
                earlier = rng.choice(paths[-6:]) if rng.random() < 0.7 else rng.choice(paths)
                keys = earlier[: rng.randint(1, len(earlier))]
            keys = (keys + [rng.randrange(3) for _ in range(rng.choice((0, 1, 2, 3, 5)))])[:10]
            paths.append(keys)
            row: dict[str, Any] = {"type": "request", "instance_id": name, "trace_id": f"{name}-{i}",
                                   "timestamp_ns": t, "keys": keys, "input_len": 4 * len(keys) + rng.randrange(4)}  # fmt: skip
            category = rng.choice(("chat", "agent", None))
            if category:
                row["category"] = category
            rows.append((t, order, row))
            t += int(rng.choice((0, 0.5, 1, 2, 5)) * NS)
    rows.sort(key=lambda r: (r[0], r[1]))
    return write_rows(path, [r for _, _, r in rows])


@pytest.fixture
def replayed(api: Any, tmp_path: Path, service_settings: Settings) -> dict[str, Any]:
    """A succeeded replay of a fresh trace, its facts file and a config naming the local trace."""
    trace = write_trace(tmp_path / "trace.jsonl", seed=21)
    uploaded = upload(api, trace.read_bytes(), "tiers.jsonl")
    r = api.post("/v1/replays", json={**CONFIG, "trace_id": uploaded["id"]})
    assert r.status_code == 202, r.text
    replay = wait_job(api, r.headers["location"])
    assert replay["state"] == "succeeded", replay["error"]
    local = tmp_path / "config.json"
    local.write_text(json.dumps(config(trace, tmp_path / "unused", **CONFIG)))
    return {
        "id": replay["id"],
        "facts_path": replay["facts"]["path"],  # relative to the storage root
        "facts": service_settings.storage / replay["facts"]["path"],
        "config": local,
    }


def submit(api: Any, route: str, body: dict[str, Any]) -> dict[str, Any]:
    r = api.post(route, json=body)
    assert r.status_code == 202, r.text
    assert r.headers["location"] == f"{route}/{r.json()['id']}"
    job = wait_job(api, r.headers["location"])
    assert job["state"] == "succeeded", job["error"]
    return job


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 0, err


def check_tiers_view(job: dict[str, Any], doc: dict[str, Any]) -> None:
    """The job view's lanes are the document's: tiers, hit rates, prefill and categories."""
    assert [lane["lane"] for lane in job["lanes"]] == [lane["lane"] for lane in doc["lanes"]]
    for view, lane in zip(job["lanes"], doc["lanes"], strict=True):
        for key in ("requests", "input_tokens", "hit_rate", "prefill_s"):
            assert view[key] == lane.get(key), (lane["lane"], key)
        assert view["tiers"] == [{k: t[k] for k in TIER_FIELDS} for t in lane["tiers"]]
        assert set(view["categories"]) == set(lane["categories"])
        for name, entry in lane["categories"].items():
            got = view["categories"][name]
            assert (got["requests"], got["input_tokens"], got["hit_rate"]) == (
                entry["requests"],
                entry["input_tokens"],
                entry["hit_rate"],
            ), name
            assert got["tiers"] == [{k: t[k] for k in TIER_FIELDS} for t in entry["tiers"]], name
    assert job["constants"] == doc["constants"] and job["notes"] == doc["notes"]


def test_a_tier_split_of_a_replay_over_http_equals_the_cli(
    api: Any, replayed: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = submit(api, "/v1/tiers", {"replay_id": replayed["id"], "tiers": TIERS, "prefill": PREFILL})
    assert job["kind"] == "tiers" and job["replay_id"] == replayed["id"]
    served = api.get(f"/v1/tiers/{job['id']}/result")
    assert served.status_code == 200 and served.headers["content-type"].startswith("application/json")
    out = tmp_path / "cli.json"
    cli(["tiers", str(replayed["facts"]), *TIERS_ARGV, *MODEL_ARGV, "--config", str(replayed["config"]),
         "-o", str(out)], capsys)  # fmt: skip
    assert served.content == out.read_bytes()
    doc = json.loads(served.content)
    assert [lane["lane"] for lane in doc["lanes"]] == ["s4", "s8"]
    for lane in doc["lanes"]:
        assert set(lane["categories"]) == {"chat", "agent", "all"}
        assert sum(c["requests"] for c in lane["categories"].values()) == lane["requests"] == 80
    check_tiers_view(job, doc)
    plot = api.get(f"/v1/tiers/{job['id']}/plot.png")
    assert plot.status_code == 200 and plot.headers["content-type"] == "image/png" and plot.content[:8] == PNG
    assert job["id"] in [item["id"] for item in api.get("/v1/tiers?state=succeeded").json()["items"]]


def test_a_tier_split_of_a_facts_file_over_http_equals_the_cli(
    api: Any, replayed: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Of the facts file: no replay, so no trace and no categories."""
    body = {"facts_path": replayed["facts_path"], "tiers": TIERS, "prefill": PREFILL}
    job = submit(api, "/v1/tiers", body)
    assert job["kind"] == "tiers" and job["replay_id"] is None
    served = api.get(f"/v1/tiers/{job['id']}/result")
    assert served.status_code == 200 and served.headers["content-type"].startswith("application/json")
    out = tmp_path / "cli.json"
    cli(["tiers", str(replayed["facts"]), *TIERS_ARGV, *MODEL_ARGV, "-o", str(out)], capsys)
    assert served.content == out.read_bytes()
    doc = json.loads(served.content)
    assert [lane["lane"] for lane in doc["lanes"]] == ["s4", "s8"]
    for lane in doc["lanes"]:
        assert lane["categories"] == {} and lane["requests"] == 80 and "prefill_s" in lane
        assert any(t["hit_blocks"] for t in lane["tiers"][1:])  # the lower tiers serve something
    assert doc["constants"]["links"]["dram"]["link"] == "pcie-gen4"
    assert doc["constants"]["links"]["ssd"]["bandwidth_bytes_per_s"] == 2e9
    check_tiers_view(job, doc)
    plot = api.get(f"/v1/tiers/{job['id']}/plot.png")
    assert plot.status_code == 200 and plot.headers["content-type"] == "image/png" and plot.content[:8] == PNG
    assert job["links"]["result"].endswith(f"/v1/tiers/{job['id']}/result")
    assert job["id"] in [item["id"] for item in api.get("/v1/tiers?state=succeeded").json()["items"]]
    # inclusive, without the prefill model
    inclusive = submit(api, "/v1/tiers", {**body, "prefill": None, "mode": "inclusive"})
    out2 = tmp_path / "cli2.json"
    cli(["tiers", str(replayed["facts"]), *TIERS_ARGV, "--mode", "inclusive", "-o", str(out2)], capsys)
    served = api.get(f"/v1/tiers/{inclusive['id']}/result")
    assert served.content == out2.read_bytes()
    doc2 = json.loads(served.content)
    assert doc2["mode"] == "inclusive" and doc2["constants"] == {}
    assert [lane["tiers"] for lane in doc2["lanes"]] != [lane["tiers"] for lane in doc["lanes"]]
    check_tiers_view(inclusive, doc2)


def same_configuration(view: dict[str, Any] | None, document: dict[str, Any] | None) -> bool:
    """The view's configuration is the document's (the view adds the value keys as null)."""
    if view is None or document is None:
        return view is document
    extra = {k: v for k, v in view.items() if k not in document}
    return all(v is None for v in extra.values()) and {k: view[k] for k in document} == document


def reachable_hit_rate(facts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> float:
    """Four fifths of the smallest plateau over the lanes (every lane's hit rate with an
    unbounded last tier): a target every lane reaches, but not with the least capacity."""
    out = tmp_path / "plateau.json"
    cli(["tiers", str(facts), "--tier", "hbm=2blocks", "--tier", "ssd=inf", "-o", str(out)], capsys)
    plateaus = [lane["tiers"][-1]["cumulative_hit_rate"] for lane in json.loads(out.read_bytes())["lanes"]]
    assert min(plateaus) > 0.05, plateaus
    return round(0.8 * min(plateaus), 4)


def test_a_tier_plan_over_http_equals_the_cli(
    api: Any, replayed: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = reachable_hit_rate(replayed["facts"], tmp_path, capsys)
    body = {"replay_id": replayed["id"], "tiers": PLAN_TIERS, "target": {"hit_rate": target}}
    job = submit(api, "/v1/plans", body)
    assert job["kind"] == "plan" and job["replay_id"] == replayed["id"]
    served = api.get(f"/v1/plans/{job['id']}/result")
    assert served.status_code == 200
    out = tmp_path / "plan.json"
    cli(["plan", str(replayed["facts"]), *PLAN_ARGV, "--target-hit-rate", str(target), "-o", str(out)], capsys)
    assert served.content == out.read_bytes()
    doc = json.loads(served.content)
    assert [p["lane"] for p in doc["lanes"]] == ["s4", "s8"]
    assert [view["lane"] for view in job["lanes"]] == ["s4", "s8"]
    for view, plan in zip(job["lanes"], doc["lanes"], strict=True):
        assert plan["best"] is not None and plan["best"]["hit_rate"] >= target
        assert same_configuration(view["best"], plan["best"])
        assert len(view["frontier"]) == len(plan["frontier"])
        assert all(same_configuration(v, d) for v, d in zip(view["frontier"], plan["frontier"], strict=True))
        assert view["searched"] == plan["searched"]
    assert job["unreachable"] == {}
    plot = api.get(f"/v1/plans/{job['id']}/plot.png")
    assert plot.status_code == 200 and plot.headers["content-type"] == "image/png" and plot.content[:8] == PNG
    assert job["id"] in [item["id"] for item in api.get("/v1/plans?state=succeeded").json()["items"]]
    # a time target with the prefill model, of the facts file
    body = {"facts_path": replayed["facts_path"], "tiers": PLAN_TIERS, "prefill": PREFILL,
            "target": {"ttft_s": 1e-4}, "ttft_stat": "p90", "gpu_price_per_hour": 3.0}  # fmt: skip
    timed = submit(api, "/v1/plans", body)
    out2 = tmp_path / "timed.json"
    cli(["plan", str(replayed["facts"]), *PLAN_ARGV, *MODEL_ARGV, "--target-ttft", "1e-4", "--ttft-stat", "p90",
         "--gpu-price", "3", "-o", str(out2)], capsys)  # fmt: skip
    served = api.get(f"/v1/plans/{timed['id']}/result")
    assert served.content == out2.read_bytes()
    doc2 = json.loads(served.content)
    assert doc2["target"] == {"ttft_s": 1e-4, "ttft_stat": "p90"}
    for view, plan in zip(timed["lanes"], doc2["lanes"], strict=True):
        assert same_configuration(view["best"], plan["best"])
        assert all(same_configuration(v, d) for v, d in zip(view["frontier"], plan["frontier"], strict=True))
        if plan["best"] is not None:
            assert plan["best"]["prefill_s"]["p90"] <= 1e-4 and "net_per_hour" in plan["best"]
        else:
            assert timed["unreachable"][plan["lane"]] == plan["unreachable"]
    assert timed["constants"] == doc2["constants"] and timed["constants"]["model"] == "Llama-3.1-8B"


@pytest.mark.parametrize(
    ("route", "patch", "loc", "words"),
    [
        ("/v1/tiers", {"tiers": [{"name": "hbm", "capacity": "1GiB", "size": 3}]}, ["body", "tiers", 0, "size"],
         "Extra inputs are not permitted"),
        ("/v1/tiers", {"moed": "inclusive"}, ["body", "moed"], "Extra inputs are not permitted"),
        ("/v1/tiers", {"tiers": [{"name": "hbm", "capacity": "-1GiB"}]}, ["body", "tiers", 0, "capacity"], "negative"),
        ("/v1/tiers", {"tiers": [{"name": "hbm", "capacity": "inf"}, {"name": "ssd", "capacity": "1GiB"}]},
         ["body", "tiers", 0, "capacity"], "only the last tier can be infinite"),
        ("/v1/plans", {"target": {"ttft_s": 0.5}}, ["body", "target"], "prefill model"),
        ("/v1/plans", {"tiers": [{"name": "hbm", "capacity": "1GiB", "price_per_gib_hour": -1}]},
         ["body", "tiers", 0, "price_per_gib_hour"], "greater than or equal to 0"),
        ("/v1/tiers", {"facts_path": "FACTS"}, ["body", "replay_id"], "exactly one of replay_id and facts_path"),
        ("/v1/plans", {"replay_id": None, "facts_path": None}, ["body", "replay_id"], "exactly one"),
        ("/v1/tiers", {"replay_id": "0" * 32}, ["body", "replay_id"], "no replay job"),
    ],
)  # fmt: skip
def test_bad_bodies_get_422_naming_the_field(
    api: Any, replayed: dict[str, Any], route: str, patch: dict[str, Any], loc: list[Any], words: str
) -> None:
    tiers = PLAN_TIERS if route == "/v1/plans" else TIERS
    body = {"replay_id": replayed["id"], "tiers": tiers, **patch}
    if body.get("facts_path") == "FACTS":
        body["facts_path"] = replayed["facts_path"]
    r = api.post(route, json=body)
    assert r.status_code == 422, r.text
    details = r.json()["error"]["details"]
    assert any(names(d, loc) and words in d["msg"] for d in details), details


def names(detail: dict[str, Any], loc: list[Any]) -> bool:
    """The error names the field: in its loc, or (a check over the whole body, loc ["body"]) as
    the message's prefix, written tiers[0].capacity."""
    if detail["loc"][: len(loc)] == loc:
        return True
    dotted = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[1:]).lstrip(".")
    return detail["loc"] == ["body"] and detail["msg"].startswith(f"{dotted}: ")
