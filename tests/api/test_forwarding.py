"""The public API's forwards to owner processes (api/forwarding.py): a bounded number in flight,
503 with Retry-After beyond it (after a bounded wait), and an event loop that stays free, so
/healthz answers while forwards are in flight. The owner is an in-process stand-in that holds
every request until the test lets it answer (httpx's MockTransport: collaborators passed in)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fastapi.testclient import TestClient

from api.forwarding import WAITING_PER_SLOT, Forwarder
from api.main import create_app
from litehit.settings import Settings

LIMIT = 2
WAIT_S = 5.0  # a deadline for things that happen in milliseconds; never a measured duration


class HeldOwner:
    """An owner that answers every lookup as resident, but only once ``release`` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.arrived = 0
        self.answered = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.arrived += 1
        while not self.release.is_set():
            await anyio.sleep(0.005)
        self.answered += 1
        if request.url.path.endswith("/batch"):
            return httpx.Response(200, json={"results": [{"outcome": "resident"}]})
        return httpx.Response(200, json={"outcome": "resident", "cause": "resident"})


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[TestClient, HeldOwner, Forwarder]]:
    settings = Settings(
        home=tmp_path,
        attribution_urls="http://owner",
        forward_limit=LIMIT,
        forward_wait_s=0.2,
        sweep_interval_s=0,
    )
    app = create_app(settings, enqueue=lambda *a: None)
    owner = HeldOwner()
    with TestClient(app) as client:
        assert client.portal is not None
        client.portal.call(app.state.forwarder.aclose)
        app.state.forwarder = forwarder = Forwarder(settings, transport=httpx.MockTransport(owner))
        try:
            yield client, owner, forwarder
        finally:
            owner.release.set()


def _until(predicate: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def test_beyond_the_in_flight_limit_a_forward_is_answered_503_and_healthz_answers(
    api: tuple[TestClient, HeldOwner, Forwarder],
) -> None:
    client, owner, forwarder = api
    lookup = {"worker": "vllm-0", "block_hash": 7}
    with ThreadPoolExecutor(LIMIT) as pool:
        held: list[Future[httpx.Response]] = [
            pool.submit(client.post, "/v1/attribution/lookups", json=lookup) for _ in range(LIMIT)
        ]
        _until(lambda: owner.arrived == LIMIT and forwarder.in_flight == LIMIT)
        r = client.post("/v1/attribution/lookups", json=lookup)  # waits its 0.2 s for a turn, then 503
        assert r.status_code == 503, r.text
        assert r.headers["Retry-After"] == "1"
        assert r.json()["error"]["code"] == "service_unavailable"
        r = client.post("/v1/attribution/lookups/batch", json={"lookups": [lookup]})  # a batch as a whole
        assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
        health = client.get("/healthz")  # the event loop is free while the forwards wait on the owner
        assert health.status_code == 200 and health.json() == {"status": "ok"}
        assert owner.answered == 0 and forwarder.in_flight == LIMIT and forwarder.refused == 2
        owner.release.set()
        assert [f.result(WAIT_S).status_code for f in held] == [200] * LIMIT
    assert client.post("/v1/attribution/lookups", json=lookup).json()["outcome"] == "resident"
    assert forwarder.in_flight == 0


def test_a_forward_waits_for_a_turn_and_the_waiters_are_bounded(
    api: tuple[TestClient, HeldOwner, Forwarder],
) -> None:
    """Within LITEHIT_FORWARD_WAIT_S a freed turn is taken (200, not 503); and no more than
    WAITING_PER_SLOT x the limit wait at once: beyond, 503 at once."""
    client, owner, forwarder = api
    lookup = {"worker": "vllm-0", "block_hash": 7}
    forwarder.wait_s = WAIT_S
    waiters = WAITING_PER_SLOT * LIMIT
    with ThreadPoolExecutor(LIMIT + waiters) as pool:
        futures = [pool.submit(client.post, "/v1/attribution/lookups", json=lookup) for _ in range(LIMIT + waiters)]
        _until(lambda: forwarder.in_flight == LIMIT and forwarder._waiting == waiters)
        started = time.monotonic()
        r = client.post("/v1/attribution/lookups", json=lookup)
        assert r.status_code == 503 and time.monotonic() - started < WAIT_S / 2, r.text  # refused without waiting
        owner.release.set()  # the waiters get their turns
        assert [f.result(WAIT_S).status_code for f in futures] == [200] * (LIMIT + waiters)
