"""The attribution owner over HTTP: events in, four-outcome lookups out, 422s that name the field,
metrics that match the answers, the shard lease, and the public API forwarding to two owners."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from service_fixtures import ROOT, free_port, settings_env, wait_for

from api.attribution import create_attribution_app
from litehit.attribution.owner import AttributionOwner
from litehit.db.migrate import upgrade
from litehit.online.store import shard_of
from litehit.settings import Settings

WINDOW_S, BUCKET_S = 60.0, 10.0


class Clocks:
    def __init__(self) -> None:
        self.mono, self.wall = 1000.0, 1_764_561_600.0

    def advance(self, seconds: float) -> None:
        self.mono += seconds
        self.wall += seconds


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    s = Settings(
        home=tmp_path,
        attribution_window_s=WINDOW_S,
        attribution_bucket_s=BUCKET_S,
        attribution_max_lag_s=5.0,
        attribution_filter_bits=1 << 16,
    )
    upgrade(s.db_url)
    return s


@pytest.fixture
def clocks() -> Clocks:
    return Clocks()


@pytest.fixture
def owner(settings: Settings, clocks: Clocks) -> Iterator[TestClient]:
    make = partial(AttributionOwner, monotonic=lambda: clocks.mono, wall=lambda: clocks.wall)
    with TestClient(create_attribution_app(settings, make_owner=make)) as client:
        yield client


def events(client: TestClient, worker: str, seq: int, ts: float, *evs: tuple[str, list[int]], epoch: str = "e1") -> Any:
    body = {"epoch": epoch, "seq": seq, "ts": ts, "events": [{"type": t, "block_hashes": h} for t, h in evs]}
    r = client.post(f"/v1/attribution/workers/{worker}/events", json=body)
    assert r.status_code == 200, r.text
    return r.json()["result"]


def outcome(client: TestClient, worker: str, block_hash: int) -> tuple[str, float | None]:
    r = client.post("/v1/attribution/lookups", json={"worker": worker, "block_hash": block_hash})
    assert r.status_code == 200, r.text
    return r.json()["outcome"], r.json()["evicted_at"]


def cause(client: TestClient, worker: str, block_hash: int | str, **more: Any) -> tuple[str, str]:
    r = client.post("/v1/attribution/lookups", json={"worker": worker, "block_hash": block_hash, **more})
    assert r.status_code == 200, r.text
    return r.json()["outcome"], r.json()["cause"]


def test_events_and_lookups_give_the_four_outcomes(owner: TestClient, clocks: Clocks) -> None:
    assert events(owner, "w-a", 0, clocks.wall, ("stored", [1, 2, 3])) == "new_epoch"
    assert events(owner, "w-a", 1, clocks.wall, ("removed", [2])) == "applied"
    removed_at = clocks.wall
    assert outcome(owner, "w-a", 1) == ("resident", None)
    assert outcome(owner, "w-a", 2) == ("evicted", removed_at)
    assert outcome(owner, "w-a", 9) == ("unknown", None)  # history shorter than the window
    assert outcome(owner, "w-b", 2) == ("unknown", None)  # an eviction on w-a never explains a miss on w-b
    clocks.advance(WINDOW_S)  # the window of history is complete; the removal still retained
    assert events(owner, "w-a", 2, clocks.wall, ("stored", [4])) == "applied"
    assert outcome(owner, "w-a", 9) == ("no_recent_match", None)
    assert outcome(owner, "w-a", 2) == ("evicted", removed_at)
    clocks.advance(BUCKET_S)  # beyond window + bucket: expired into the aged filter
    assert outcome(owner, "w-a", 2) == ("unknown", None)
    assert outcome(owner, "w-a", 2**64 - 1) == outcome(owner, "w-a", -1)

    r = owner.post(
        "/v1/attribution/lookups/batch",
        json={"lookups": [{"worker": "w-a", "block_hash": 4}, {"worker": "ghost", "block_hash": 4}]},
    )
    assert r.status_code == 200
    assert [x["outcome"] for x in r.json()["results"]] == ["resident", "unknown"]
    assert "ghost" in r.json()["results"][1]["reason"]


def test_gaps_duplicates_restarts_and_lag(owner: TestClient, clocks: Clocks) -> None:
    events(owner, "w", 0, clocks.wall, ("stored", [1]))
    clocks.advance(WINDOW_S + BUCKET_S)
    events(owner, "w", 1, clocks.wall, ("stored", [5]))
    assert outcome(owner, "w", 77)[0] == "no_recent_match"
    removed_at = clocks.wall
    assert events(owner, "w", 5, removed_at, ("removed", [5])) == "held"  # seqs 2-4 missing: it waits for them
    assert cause(owner, "w", 77) == ("unknown", "pending")
    clocks.advance(1.0)  # the reorder grace (LITEHIT_ATTRIBUTION_REORDER_GRACE_S): seqs 2-4 are lost
    assert cause(owner, "w", 77) == ("unknown", "gap")
    assert outcome(owner, "w", 1)[0] == "unknown"  # stored before the gap: it may be gone
    assert outcome(owner, "w", 5) == ("evicted", removed_at)  # removed after the gap
    assert events(owner, "w", 3, clocks.wall, ("stored", [6])) == "duplicate"
    (w,) = owner.get("/v1/attribution/workers").json()["items"]
    assert [(c["first_seq"], c["last_seq"]) for c in w["coverage"]] == [(0, 1), (5, 5)]  # seqs 2-4 missing
    assert w["coverage"][0]["since_s_ago"] == WINDOW_S + BUCKET_S + 1 and w["coverage"][1]["until_s_ago"] == 0
    assert w["resident_set_complete"] is False
    assert outcome(owner, "w", 6)[0] == "unknown"
    assert events(owner, "w", 0, clocks.wall, ("stored", [8]), epoch="e2") == "new_epoch"
    assert outcome(owner, "w", 5)[0] == "unknown"  # evidence never crosses a restart
    assert events(owner, "w", 9, clocks.wall, ("stored", [9]), epoch="e1") == "stale_epoch"
    events(owner, "w", 1, clocks.wall - 30, ("stored", [10]), epoch="e2")  # 30 s behind
    r = owner.post("/v1/attribution/lookups", json={"worker": "w", "block_hash": 10}).json()
    assert r["outcome"] == "unknown" and "lag" in r["reason"]

    listed = owner.get("/v1/attribution/workers").json()["items"]
    (w,) = listed
    assert w["worker"] == "w" and w["epoch"] == "e2" and w["next_seq"] == 2
    assert w["counts"]["gaps"] == 1 and w["counts"]["missing_batches"] == 3
    assert w["counts"]["duplicate_batches"] == 1 and w["counts"]["stale_epoch_batches"] == 1


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"seq": 0, "ts": 1.0, "events": []}, ["body", "epoch"]),
        ({"epoch": "e", "seq": -1, "ts": 1.0, "events": []}, ["body", "seq"]),
        ({"epoch": "e", "seq": 0, "ts": "NaN", "events": []}, ["body", "ts"]),
        (
            {"epoch": "e", "seq": 0, "ts": 1.0, "events": [{"type": "evicted", "block_hashes": []}]},
            ["body", "events", 0, "type"],
        ),
        (
            {"epoch": "e", "seq": 0, "ts": 1.0, "events": [{"type": "stored", "block_hashes": ["x"]}]},
            ["body", "events", 0, "block_hashes", 0],
        ),
        (
            {"epoch": "e", "seq": 0, "ts": 1.0, "events": [{"type": "cleared", "block_hashes": [1]}]},
            ["body", "events", 0],
        ),
        ({"epoch": "e", "seq": 0, "ts": 1.0, "events": [], "extra": 1}, ["body", "extra"]),
        (  # a boolean is not a hash (it was read as 0)
            {"epoch": "e", "seq": 0, "ts": 1.0, "events": [{"type": "stored", "block_hashes": [False]}]},
            ["body", "events", 0, "block_hashes", 0],
        ),
        (
            {"epoch": "e", "seq": 0, "ts": 1.0, "events": [{"type": "stored", "block_hashes": ["12zz"]}]},
            ["body", "events", 0, "block_hashes", 0],
        ),
        (
            {"epoch": "e", "seq": 0, "ts": 1.0, "events": [{"type": "stored", "block_hashes": [1], "group": -1}]},
            ["body", "events", 0, "group"],
        ),
        (
            {"epoch": "e", "seq": 0, "ts": 1.0, "events": [{"type": "stored", "block_hashes": [1], "group": True}]},
            ["body", "events", 0, "group"],
        ),
        (
            {"epoch": "e", "seq": 0, "ts": 1.0, "events": [{"type": "cleared", "group": 1}]},
            ["body", "events", 0],
        ),
        (
            {"epoch": "e", "seq": 0, "events": [{"type": "removed", "block_hashes": [1], "group_kind": "mamba"}]},
            ["body", "events", 0],
        ),
        ({"epoch": "e", "seq": True, "events": []}, ["body", "seq"]),
    ],
)
def test_malformed_events_are_422_naming_the_field(owner: TestClient, body: dict[str, Any], loc: list[Any]) -> None:
    r = owner.post("/v1/attribution/workers/w/events", json=body)
    assert r.status_code == 422, r.text
    assert [d["loc"] for d in r.json()["error"]["details"]] == [loc]
    assert owner.get("/v1/attribution/workers").json()["items"] == []


def test_malformed_lookups_are_422(owner: TestClient) -> None:
    for body, loc in [
        ({"worker": "w"}, ["body", "block_hash"]),
        ({"worker": "", "block_hash": 1}, ["body", "worker"]),
        ({"worker": "a/b", "block_hash": 1}, ["body", "worker"]),
        ({"worker": "..", "block_hash": 1}, ["body", "worker"]),
        ({"worker": "w", "block_hash": 1.5}, ["body", "block_hash"]),
        ({"worker": "w", "block_hash": False}, ["body", "block_hash"]),
        ({"worker": "w", "block_hash": "sha256:ab"}, ["body", "block_hash"]),
        ({"worker": "w", "block_hash": "a" * 257}, ["body", "block_hash"]),
        ({"worker": "w", "block_hash": 2**1100}, ["body", "block_hash"]),
        ({"worker": "w", "block_hash": 1, "group": "0"}, ["body", "group"]),
        ({"worker": "w", "block_hash": 1, "block_index": -1, "lookup_limit": 2}, ["body", "block_index"]),
        ({"worker": "w", "block_hash": 1, "block_index": 1}, ["body"]),  # the limit comes with it
        ({"worker": "w", "block_hash": 1, "lookup_limit": 1}, ["body"]),
    ]:
        r = owner.post("/v1/attribution/lookups", json=body)
        assert r.status_code == 422 and [d["loc"] for d in r.json()["error"]["details"]] == [loc], r.text
    r = owner.post("/v1/attribution/lookups/batch", json={"lookups": []})
    assert r.status_code == 422


def test_hashes_as_vllm_publishes_them_groups_and_the_lookup_limit(owner: TestClient, clocks: Clocks) -> None:
    """A bytes hash (vLLM's sha256) is sent as hex; an event and a lookup spelling one hash as hex
    or as an integer reduce to the same key. Groups keep their own evidence; a block at the lookup
    limit is not a miss; a batch without ts is stamped with the owner's clock (no lag)."""
    sha = hashlib.sha256(b"block").digest()
    body = {
        "epoch": "e",
        "seq": 0,
        "events": [
            {"type": "stored", "block_hashes": [sha.hex(), "0000ff", 12], "group": 0, "group_kind": "full_attention"},
            {"type": "stored", "block_hashes": [sha.hex()], "group": 1, "group_kind": "sliding_window"},
            {"type": "removed", "block_hashes": [sha.hex()], "group": 1},
            {"type": "removed", "block_hashes": ["0x0c"]},
        ],
    }
    r = owner.post("/v1/attribution/workers/w/events", json=body)
    assert r.status_code == 200 and r.json()["result"] == "new_epoch", r.text
    assert cause(owner, "w", sha.hex()) == ("resident", "resident")
    assert cause(owner, "w", int.from_bytes(sha, "big")) == ("resident", "resident")
    assert cause(owner, "w", "0X" + sha.hex().upper()) == ("resident", "resident")
    assert cause(owner, "w", sha.hex(), group=1) == ("evicted", "evicted")
    assert cause(owner, "w", 255) == ("resident", "resident")
    assert cause(owner, "w", "ff") == ("resident", "resident")
    assert cause(owner, "w", 12) == ("evicted", "evicted")
    r = owner.post("/v1/attribution/lookups", json={"worker": "w", "block_hash": 12}).json()
    assert (r["evicted_at"], r["group"], r["group_kind"]) == (clocks.wall, 0, "full_attention")
    assert cause(owner, "w", 12, block_index=2, lookup_limit=3) == ("evicted", "evicted")
    assert cause(owner, "w", 12, block_index=3, lookup_limit=3) == ("not_a_miss", "beyond_lookup_limit")
    assert cause(owner, "nobody", 12, block_index=3, lookup_limit=3) == ("not_a_miss", "beyond_lookup_limit")
    (listed,) = owner.get("/v1/attribution/workers").json()["items"]
    assert listed["groups"] == {"0": "full_attention", "1": "sliding_window"} and listed["lag_s"] == 0


def test_the_housekeeping_timer_expires_evidence_without_lookups(settings: Settings, clocks: Clocks) -> None:
    """No lookup, no event: the owner's housekeeping (every lease_s / 3) sweeps out the evidence
    that aged past the window and frees its memory."""
    make = partial(AttributionOwner, monotonic=lambda: clocks.mono, wall=lambda: clocks.wall, lease_s=0.3)
    with TestClient(create_attribution_app(settings, make_owner=make)) as owner:
        keys = list(range(1, 50_001))
        events(owner, "w", 0, clocks.wall, ("stored", keys), ("removed", keys))
        store = owner.app.state.owner.store  # type: ignore[attr-defined]
        evidence = store.workers["w"].evidence  # read as it is: no lookup, no advance
        assert evidence.stats(settle=False).evidence == 50_000
        clocks.advance(WINDOW_S + BUCKET_S)
        wait_for(lambda: evidence.stats(settle=False).evidence == 0, 10, "the timer's expiry")
        assert evidence.stats(settle=False).evidence_bytes == 0
        assert evidence.stats(settle=False).expired == 50_000


def test_metrics_count_what_the_routes_answered(owner: TestClient, clocks: Clocks) -> None:
    events(owner, "w-1", 0, clocks.wall, ("stored", [1, 2]), ("removed", [1]))
    for h in (1, 1, 2, 3):
        outcome(owner, "w-1", h)
    outcome(owner, "nobody", 1)
    text = owner.get("/metrics").text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }

    def lookups(outcome: str, cause: str) -> float:
        labels = (("cause", cause), ("outcome", outcome), ("worker", "w-1"))
        return samples[("litehit_attribution_lookups_total", labels)]

    assert lookups("evicted", "evicted") == 2
    assert lookups("evicted", "reset") == 0
    assert lookups("resident", "resident") == 1
    assert lookups("unknown", "short_history") == 1
    assert lookups("not_a_miss", "beyond_lookup_limit") == 0
    assert samples[("litehit_attribution_event_blocks_total", (("type", "stored"), ("worker", "w-1")))] == 2
    assert samples[("litehit_attribution_retained_evictions", (("worker", "w-1"),))] == 1
    assert samples[("litehit_attribution_lookup_seconds_count", ())] == 5
    assert samples[("litehit_attribution_unowned_lookups_total", (("why", "no_events"),))] == 1
    assert samples[("litehit_attribution_unowned_lookups_total", (("why", "other_shard"),))] == 0
    assert samples[("litehit_attribution_apply_seconds_count", ())] == 1
    per_entry = samples[("litehit_attribution_retained_entry_bytes", (("worker", "w-1"),))]
    (view,) = owner.get("/v1/attribution/workers").json()["items"]
    assert per_entry == view["bytes_per_retained_entry"] == view["evidence_bytes"] / view["evicted_retained"]
    assert samples[("litehit_attribution_memory_bytes", (("worker", "w-1"),))] == view["memory_bytes"]


def test_a_second_owner_of_the_same_shard_is_refused(settings: Settings) -> None:
    first = AttributionOwner(settings)
    first.claim()
    try:
        with pytest.raises(RuntimeError, match="attribution shard 0 is already owned by a live process"):
            AttributionOwner(settings).claim()
    finally:
        first.release()
    second = AttributionOwner(settings)
    second.claim()  # released: free at once
    second.release()


def _ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).json().get("status") == "ok"
    except (httpx.HTTPError, ValueError):
        return False


@pytest.mark.service
def test_public_api_forwards_events_and_lookups_to_two_owners(service_settings: Settings) -> None:
    from api.main import create_app

    ports = [free_port(), free_port()]
    procs = []
    base = service_settings.model_copy(update={"attribution_shards": 2, "attribution_window_s": 3600.0})
    try:
        for shard, port in enumerate(ports):
            env = settings_env(base.model_copy(update={"attribution_shard": shard}))
            cmd = [
                sys.executable,
                "-m",
                "uvicorn",
                "api.attribution:app",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ]
            procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env))
        for port in ports:
            wait_for(lambda p=port: _ok(f"http://127.0.0.1:{p}/healthz"), 30, "an attribution owner")
        urls = ",".join(f"http://127.0.0.1:{p}" for p in ports)
        api_settings = base.model_copy(update={"attribution_urls": urls, "sweep_interval_s": 0})
        workers = [f"vllm-{n}" for n in range(6)]
        assert {shard_of(w, 2) for w in workers} == {0, 1}
        with TestClient(create_app(api_settings, enqueue=lambda *a: None)) as api:
            for n, w in enumerate(workers):
                body = {
                    "epoch": "boot",
                    "seq": 0,
                    "ts": time.time(),
                    "events": [{"type": "stored", "block_hashes": [n, 100]}, {"type": "removed", "block_hashes": [n]}],
                }
                r = api.post(f"/v1/attribution/workers/{w}/events", json=body)
                assert r.status_code == 200 and r.json()["result"] == "new_epoch", r.text
            lookups = [{"worker": w, "block_hash": h} for w in reversed(workers) for h in (100, workers.index(w), 999)]
            r = api.post("/v1/attribution/lookups/batch", json={"lookups": lookups})
            assert r.status_code == 200, r.text
            assert [x["outcome"] for x in r.json()["results"]] == ["resident", "evicted", "unknown"] * len(workers)
            one = api.post("/v1/attribution/lookups", json={"worker": "vllm-3", "block_hash": 2})
            assert one.status_code == 200 and one.json()["outcome"] == "unknown"  # 2 was evicted on vllm-2 only
            listed = api.get("/v1/attribution/workers").json()["items"]
            assert [i["worker"] for i in listed] == workers and {i["shard"] for i in listed} == {0, 1}
            assert api.post("/v1/attribution/workers/w/events", json={"epoch": "e"}).status_code == 422
            assert api.post("/v1/attribution/workers/a%25b/events", json=body).status_code == 422
        dead = free_port()  # no owner listens there: its shard's lookups are unknown, the others stand
        partly = api_settings.model_copy(
            update={"attribution_urls": f"http://127.0.0.1:{ports[0]},http://127.0.0.1:{dead}"}
        )
        with TestClient(create_app(partly, enqueue=lambda *a: None)) as api:
            r = api.post("/v1/attribution/lookups/batch", json={"lookups": lookups})
            assert r.status_code == 200, r.text
            for item, result in zip(lookups, r.json()["results"], strict=True):
                if shard_of(item["worker"], 2) == 1:
                    assert result["outcome"] == "unknown" and "shard 1 cannot be reached" in result["reason"]
                else:
                    assert result["outcome"] != "unknown" or item["block_hash"] == 999
        with TestClient(create_app(base.model_copy(update={"sweep_interval_s": 0}), enqueue=lambda *a: None)) as bare:
            r = bare.post("/v1/attribution/lookups", json={"worker": "w", "block_hash": 1})
            assert r.status_code == 503 and r.json()["error"]["code"] == "attribution_not_configured"
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=20)


def test_the_owner_subscribes_to_a_zmq_publisher(settings: Settings) -> None:
    """LITEHIT_ATTRIBUTION_ZMQ names a worker's publisher; its events (vLLM's wire format) reach the
    owner's evidence, and a gap the replay socket cannot fill makes absent keys unknown."""
    import msgspec
    import zmq

    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    s = settings.model_copy(
        update={"attribution_zmq": f"vllm-0=tcp://127.0.0.1:{port}#kv", "attribution_window_s": 0.5}
    )
    encode = msgspec.msgpack.Encoder().encode

    def send(seq: int, *events: list[Any]) -> None:
        pub.send_multipart([b"kv", seq.to_bytes(8, "big"), encode([time.time(), list(events)])])

    try:
        with TestClient(create_attribution_app(s)) as owner:
            (listed,) = owner.get("/v1/attribution/workers").json()["items"]  # subscribed, nothing received
            assert listed["worker"] == "vllm-0" and listed["epoch"] is None and listed["subscriber"]["batches"] == 0
            seq = 0
            deadline = time.monotonic() + 20
            while outcome(owner, "vllm-0", 5)[0] != "resident":  # PUB/SUB joins late: publish until heard
                assert time.monotonic() < deadline, "the subscriber never received a batch"
                send(seq, ["BlockStored", [5, 6], None, [1, 2, 3, 4], 2, None, "GPU"])
                seq += 1
                time.sleep(0.05)
            send(seq, ["BlockRemoved", [6], "GPU"], ["BlockRemoved", [5], "CPU"])  # the CPU tier does not count
            seq += 1
            wait_for(lambda: outcome(owner, "vllm-0", 6)[0] == "evicted", 10, "the removal")
            assert outcome(owner, "vllm-0", 5)[0] == "resident"
            sha = hashlib.sha256(b"a block").digest()  # vLLM's sha256 block hashes are bytes on the wire
            send(seq, ["BlockStored", [sha], None, [1, 2], 2, None, "GPU"])
            seq += 1
            wait_for(lambda: cause(owner, "vllm-0", sha.hex()) == ("resident", "resident"), 10, "the bytes hash")
            time.sleep(0.6)  # a window of complete history
            send(seq, ["BlockStored", [7], None, [1, 2], 2, None, None])
            seq += 1
            wait_for(lambda: outcome(owner, "vllm-0", 7)[0] == "resident", 10, "the next batch")
            assert outcome(owner, "vllm-0", 99)[0] == "no_recent_match"
            send(seq + 3, ["BlockStored", [8], None, [1, 2], 2, None, None])  # seq+0..+2 lost, no replay socket
            wait_for(lambda: outcome(owner, "vllm-0", 8)[0] == "resident", 10, "the batch after the gap")
            assert outcome(owner, "vllm-0", 99)[0] == "unknown"
            (worker,) = owner.get("/v1/attribution/workers").json()["items"]
            assert worker["counts"]["gaps"] == 1 and worker["subscriber"]["gaps"] == 1
            families = {f.name: f for f in text_string_to_metric_families(owner.get("/metrics").text)}
            counted = {s.labels["counter"]: s.value for s in families["litehit_attribution_subscriber_events"].samples}
            assert counted["gaps"] == 1 and counted["batches"] == worker["subscriber"]["batches"] >= 4
            pub.close(linger=0)  # the engine goes away: what it did since is unknown
            wait_for(lambda: outcome(owner, "vllm-0", 8)[0] == "unknown", 10, "the disconnect")
            r = owner.post("/v1/attribution/lookups", json={"worker": "vllm-0", "block_hash": 8}).json()
            assert "disconnected" in r["reason"]
    finally:
        pub.close(linger=0)
        ctx.term()


def test_the_owner_forgets_idle_workers_in_its_housekeeping(settings: Settings, clocks: Clocks) -> None:
    s = settings.model_copy(update={"attribution_forget_after_s": 30.0})
    make = partial(AttributionOwner, monotonic=lambda: clocks.mono, wall=lambda: clocks.wall)
    with TestClient(create_attribution_app(s, make_owner=make)) as owner:
        events(owner, "gone", 0, clocks.wall, ("stored", [1]))
        clocks.advance(31)
        events(owner, "here", 0, clocks.wall, ("stored", [1]))
        owner.app.state.owner.housekeep()  # type: ignore[attr-defined]
        assert [w["worker"] for w in owner.get("/v1/attribution/workers").json()["items"]] == ["here"]
        assert outcome(owner, "gone", 1) == ("unknown", None)
