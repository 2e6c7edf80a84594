"""The ZMQ KV-event subscriber against a real publisher that speaks vLLM's wire format.

The fake engine below is written from the wire format, not from LiteHit's decoder: a PUB socket
sending ``[topic, seq (8 bytes, big-endian), msgpack payload]`` and a ROUTER replay socket that
answers a start seq with one message per buffered batch and an end marker. Payloads are plain
msgpack lists and maps (the shapes vLLM's and SGLang's array-like and map structs encode to).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest
import zmq

from litehit.attribution.events import BlockEvent, EventBatch, EventType
from litehit.attribution.kv_events import KVEventDecoder
from litehit.attribution.store import AttributionStore
from litehit.attribution.subscriber import KVEventSubscriber, SubscriberEndpoint, parse_endpoints
from litehit.errors import KVEventDecodeError

TOPIC = "kv-events"
WAIT_S = 5.0  # a deadline for things that happen in milliseconds; never a measured duration
END_SEQ = (-1).to_bytes(8, "big", signed=True)

_encode = msgspec.msgpack.Encoder().encode


# -- payloads, written as the engines encode them ----------------------------------------------


def stored(hashes: list[Any], medium: str | None = "GPU", *extra: Any) -> list[Any]:
    """vLLM's array-like BlockStored: tag, block_hashes, parent_block_hash, token_ids,
    block_size, lora_id, medium (then newer trailing fields)."""
    return ["BlockStored", hashes, None, list(range(4 * len(hashes))), 4, None, medium, *extra]


def removed(hashes: list[Any], medium: str | None = "GPU", *extra: Any) -> list[Any]:
    return ["BlockRemoved", hashes, medium, *extra]


def cleared() -> list[Any]:
    return ["AllBlocksCleared"]


def batch(ts: float, events: list[Any], dp_rank: int | None = 0) -> bytes:
    """vLLM's array-like EventBatch: [ts, events, data_parallel_rank] (rank omitted when None)."""
    return _encode([ts, events] if dp_rank is None else [ts, events, dp_rank])


# -- a fake engine -----------------------------------------------------------------------------


def _bind(socket: zmq.Socket[bytes], port: int) -> str:
    """Binds to 127.0.0.1 on a free port, or on ``port`` (a previous engine's, just closed: it
    may take a moment to be free); returns the endpoint."""
    if not port:
        return f"tcp://127.0.0.1:{socket.bind_to_random_port('tcp://127.0.0.1')}"
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            socket.bind(f"tcp://127.0.0.1:{port}")
            return f"tcp://127.0.0.1:{port}"
        except zmq.ZMQError:
            assert time.monotonic() < deadline, f"port {port} never became free"
            time.sleep(0.01)


class FakeEngine:
    """An engine's KV-event publisher: a PUB socket and, when ``replay`` is not None, a ROUTER
    replay socket served by a thread. ``replay`` is the answer layout: ``"topic"`` sends
    ``[topic, seq, payload]`` and ends with ``[b"", END_SEQ, b""]`` (vLLM since the topic fix);
    ``"seq"`` sends ``[seq, payload]`` and ends with ``[END_SEQ, b""]`` (older vLLM, SGLang);
    ``"silent"`` binds the socket and never answers."""

    def __init__(
        self,
        ctx: zmq.Context[zmq.Socket[bytes]],
        replay: str | None = "topic",
        port: int = 0,
        *,
        replay_port: int = 0,
        xpub: bool = False,
    ) -> None:
        self.topic = TOPIC.encode()
        self.ctx, self.xpub = ctx, xpub
        self.pub, self.endpoint = self._bind_pub(port)
        self.sent: dict[int, bytes] = {}  # the replay buffer: every batch, published or dropped
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.replay_endpoint: str | None = None
        self.replay_requests: list[int] = []
        if replay is not None:
            router = ctx.socket(zmq.ROUTER)
            router.setsockopt(zmq.LINGER, 0)
            self.replay_endpoint = _bind(router, replay_port)
            self._thread = threading.Thread(target=self._serve, args=(router, replay), daemon=True)
            self._thread.start()

    def _bind_pub(self, port: int) -> tuple[zmq.Socket[bytes], str]:
        """The PUB socket (an XPUB with ``xpub``: it sees the subscriber's subscription, so a test
        can wait until a reconnected subscriber listens before publishing)."""
        pub = self.ctx.socket(zmq.XPUB if self.xpub else zmq.PUB)
        pub.setsockopt(zmq.LINGER, 0)
        if self.xpub:
            pub.setsockopt(zmq.XPUB_VERBOSE, 1)
        return pub, _bind(pub, port)

    def reopen(self) -> None:
        """The same engine process drops its connections (a network blip): a new PUB socket on the
        same port; the seq numbering, the replay buffer and the replay socket stay."""
        port = int(self.endpoint.rsplit(":", 1)[1])
        self.pub.close(linger=0)
        self.xpub = True
        self.pub, _ = self._bind_pub(port)

    def wait_subscribed(self) -> None:
        """(XPUB only) Until a subscriber's subscription arrives: what is published next reaches it."""
        assert self.xpub
        assert self.pub.poll(int(WAIT_S * 1000)), "no subscriber (re)connected"
        while not self.pub.recv().startswith(b"\x01"):
            assert self.pub.poll(int(WAIT_S * 1000)), "no subscription arrived"

    def publish(self, seq: int, payload: bytes) -> None:
        with self._lock:
            self.sent[seq] = payload
        self.pub.send_multipart([self.topic, seq.to_bytes(8, "big"), payload])

    def drop(self, seq: int, payload: bytes) -> None:
        """A batch the engine buffered but the subscriber never received."""
        with self._lock:
            self.sent[seq] = payload

    def _serve(self, router: zmq.Socket[bytes], layout: str) -> None:
        try:
            while not self._stop.is_set():
                if not router.poll(20):
                    continue
                client, delimiter, start = router.recv_multipart()
                assert delimiter == b""
                first = int.from_bytes(start, "big")
                self.replay_requests.append(first)
                if layout == "silent":
                    continue
                with self._lock:
                    buffered = sorted((s, p) for s, p in self.sent.items() if s >= first)
                for seq, payload in buffered:
                    head = [self.topic] if layout == "topic" else []
                    router.send_multipart([client, b"", *head, seq.to_bytes(8, "big"), payload])
                end = [b"", END_SEQ, b""] if layout == "topic" else [END_SEQ, b""]
                router.send_multipart([client, b"", *end])
        finally:
            router.close(linger=0)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(WAIT_S)
        self.pub.close(linger=0)


class Collector:
    """The deliver() callback: records every (worker, batch) it is given."""

    def __init__(self) -> None:
        self.got: list[tuple[str, EventBatch]] = []
        self._cond = threading.Condition()

    def __call__(self, worker: str, b: EventBatch) -> None:
        with self._cond:
            self.got.append((worker, b))
            self._cond.notify_all()

    @property
    def batches(self) -> list[EventBatch]:
        with self._cond:
            return [b for _, b in self.got]

    def wait_for(self, pred: Callable[[list[EventBatch]], bool]) -> list[EventBatch]:
        with self._cond:
            ok = self._cond.wait_for(lambda: pred([b for _, b in self.got]), WAIT_S)
            assert ok, f"deliveries never satisfied the condition: {[(b.epoch, b.seq) for _, b in self.got]}"
            return [b for _, b in self.got]

    def wait_seq(self, seq: int) -> list[EventBatch]:
        return self.wait_for(lambda bs: bool(bs) and bs[-1].seq == seq)


def wait_until(pred: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not pred():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


@pytest.fixture
def ctx() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    yield context
    # term() returns only once every socket is closed: the subscriber closed its own.
    done = threading.Thread(target=context.term, daemon=True)
    done.start()
    done.join(WAIT_S)
    assert not done.is_alive(), "a socket was left open"


class Rig:
    """A fake engine, a subscriber to it and the collector of what it delivers."""

    def __init__(self, ctx: zmq.Context[zmq.Socket[bytes]], *, replay: str | None, use_replay: bool, **kw: Any):
        self.engine = FakeEngine(ctx, replay)
        self.got = Collector()
        self.sub = KVEventSubscriber(
            "worker-a",
            self.engine.endpoint,
            self.got,
            replay_endpoint=self.engine.replay_endpoint if use_replay else None,
            topic=TOPIC,
            context=ctx,
            **kw,
        )
        self.sub.start()
        self.next_seq = 0

    def warm_up(self) -> int:
        """Publishes empty batches until the subscriber receives them (PUB/SUB slow joiner);
        returns the next seq to publish."""
        deadline = time.monotonic() + WAIT_S
        before = len(self.got.batches)
        while len(self.got.batches) == before:
            assert time.monotonic() < deadline, "the subscriber never received the warm-up"
            self.engine.publish(self.next_seq, batch(0.0, []))
            self.next_seq += 1
            time.sleep(0.01)
        self.got.wait_seq(self.next_seq - 1)
        return self.next_seq

    def close(self) -> None:
        self.sub.stop()
        self.engine.close()


@pytest.fixture
def rig(ctx: zmq.Context[zmq.Socket[bytes]], request: pytest.FixtureRequest) -> Iterator[Rig]:
    params: dict[str, Any] = getattr(request, "param", {})
    kw = {"replay_timeout_s": WAIT_S, **params.get("kw", {})}  # a replay ends at its end marker, long before
    r = Rig(ctx, replay=params.get("replay", "topic"), use_replay=params.get("use_replay", True), **kw)
    yield r
    r.close()


# -- (a) batches arrive in order as the store's batches ----------------------------------------


def test_stored_removed_cleared_arrive_in_order_with_ts_and_seq(rig: Rig) -> None:
    s = rig.warm_up()
    rig.engine.publish(s, batch(1700000000.25, [stored([11, 12]), removed([11])]))
    rig.engine.publish(s + 1, batch(1700000001.5, [cleared(), stored([13])]))
    got = rig.got.wait_seq(s + 1)
    epoch = got[0].epoch
    assert epoch.startswith("zmq-") and epoch.endswith("-0")
    assert got[-2:] == [
        EventBatch(
            epoch,
            s,
            1700000000.25,
            (BlockEvent(EventType.STORED, (11, 12)), BlockEvent(EventType.REMOVED, (11,))),
        ),
        EventBatch(epoch, s + 1, 1700000001.5, (BlockEvent(EventType.CLEARED), BlockEvent(EventType.STORED, (13,)))),
    ]
    assert [b.seq for b in got] == list(range(got[0].seq, s + 2))
    assert {w for w, _ in rig.got.got} == {"worker-a"}
    stats = rig.sub.stats()
    assert stats["last_seq"] == s + 1
    assert stats["batches"] == len(got)
    assert stats["events"] == 4
    assert (stats["gaps"], stats["restarts"], stats["decode_errors"]) == (0, 0, 0)


# -- (b) integer and bytes block hashes ---------------------------------------------------------


def test_int_and_bytes_hashes(rig: Rig) -> None:
    s = rig.warm_up()
    sha = bytes(range(32))
    rig.engine.publish(s, batch(1.0, [stored([2**64 - 1, -5, sha]), removed([b"\x01\x00"])]))
    got = rig.got.wait_seq(s)[-1]
    assert got.events == (
        BlockEvent(EventType.STORED, (2**64 - 1, -5, int.from_bytes(sha, "big"))),
        BlockEvent(EventType.REMOVED, (256,)),
    )


# -- (c) the medium filter ---------------------------------------------------------------------


def test_a_cpu_tier_removal_is_skipped_and_counted(rig: Rig) -> None:
    s = rig.warm_up()
    events = [removed([1], "CPU"), removed([2], "GPU"), stored([3], "cpu"), removed([4], "gpu"), removed([5], None)]
    rig.engine.publish(s, batch(1.0, events))
    got = rig.got.wait_seq(s)[-1]
    assert got.events == (
        BlockEvent(EventType.REMOVED, (2,)),
        BlockEvent(EventType.REMOVED, (4,)),
        BlockEvent(EventType.REMOVED, (5,)),
    )
    assert rig.sub.stats()["skipped_medium"] == 2


@pytest.mark.parametrize(
    ("media", "kept"),
    [(None, [1, 2, 3]), (["cpu"], [1]), ([None, "GPU", "CPU"], [1, 2, 3]), (["GPU"], [2])],
)
def test_the_medium_filter_is_configurable(media: list[str | None] | None, kept: list[int]) -> None:
    payload = batch(1.0, [removed([1], "CPU"), removed([2], "GPU"), removed([3], None)])
    decoded = KVEventDecoder(media).decode(payload, epoch="e", seq=0)
    assert [e.block_hashes[0] for e in decoded.batch.events] == kept
    assert decoded.skipped_medium == 3 - len(kept)


# -- (d) schema drift: extra trailing fields, missing optional ones, map-shaped events ---------


def test_extra_trailing_and_missing_optional_fields_decode(rig: Rig) -> None:
    s = rig.warm_up()
    newest = stored([21], "GPU", "lora-x", [None], 0, "full_attention", None, {"future": 1})
    oldest = ["BlockStored", [22], None, [1, 2, 3, 4], 4, None]  # SGLang / early vLLM: no medium
    rig.engine.publish(s, batch(2.0, [newest, oldest, removed([21], "GPU", 0, "more"), ["BlockRemoved", [22]]]))
    rig.engine.publish(s + 1, batch(3.0, [cleared()], dp_rank=None))  # data_parallel_rank omitted
    got = rig.got.wait_seq(s + 1)
    assert [b.events for b in got[-2:]] == [
        (
            BlockEvent(EventType.STORED, (21,), group=0, group_kind="full_attention"),
            BlockEvent(EventType.STORED, (22,)),
            BlockEvent(EventType.REMOVED, (21,), group=0),
            BlockEvent(EventType.REMOVED, (22,)),
        ),
        (BlockEvent(EventType.CLEARED),),
    ]
    assert rig.sub.stats()["decode_errors"] == 0


def test_map_shaped_events_and_envelope_decode(rig: Rig) -> None:
    """Newer vLLM encodes each event as a map tagged under "type" (unknown keys, key order free)."""
    s = rig.warm_up()
    events = [
        {
            "type": "BlockStored",
            "block_hashes": [31, b"\x02"],
            "parent_block_hash": None,
            "token_ids": [1],
            "block_size": 1,
            "lora_id": None,
            "medium": "GPU",
            "lora_name": None,
            "group_idx": 0,
        },
        {"medium": "CPU", "block_hashes": [32], "type": "BlockRemoved"},
        {"type": "BlockRemoved", "block_hashes": [33], "medium": "GPU", "group_idx": 1, "new_key": [1, 2]},
        {"type": "AllBlocksCleared"},
        ["BlockRemoved", [34]],
    ]
    rig.engine.publish(s, _encode([4.0, events, 0]))
    rig.engine.publish(s + 1, _encode({"ts": 5.0, "events": [{"type": "BlockRemoved", "block_hashes": [35]}]}))
    got = rig.got.wait_seq(s + 1)
    assert [b.events for b in got[-2:]] == [
        (
            BlockEvent(EventType.STORED, (31, 2), group=0),
            BlockEvent(EventType.REMOVED, (33,), group=1),
            BlockEvent(EventType.CLEARED),
            BlockEvent(EventType.REMOVED, (34,)),
        ),
        (BlockEvent(EventType.REMOVED, (35,)),),
    ]
    assert rig.sub.stats()["skipped_medium"] == 1


def test_the_kv_cache_group_and_its_kind_are_read_in_both_encodings() -> None:
    """vLLM with hybrid-model KV events: group_idx on BlockStored (after extra_keys) and BlockRemoved
    (after medium), kv_cache_spec_kind on BlockStored; in tagged arrays and tagged maps alike."""
    payload = _encode(
        [
            7.0,
            [
                stored([1], "GPU", None, [None], 1, "sliding_window", 1024),
                removed([1], "GPU", 1),
                {
                    "type": "BlockStored",
                    "block_hashes": [2],
                    "medium": "GPU",
                    "group_idx": 0,
                    "kv_cache_spec_kind": "Full_Attention",
                    "kv_cache_spec_sliding_window": None,
                },
                {"type": "BlockRemoved", "block_hashes": [2], "medium": "GPU", "group_idx": 0},
                stored([3]),  # no group named: group 0 of an engine that names none
            ],
        ]
    )
    assert KVEventDecoder().decode(payload, epoch="e", seq=0).batch.events == (
        BlockEvent(EventType.STORED, (1,), group=1, group_kind="sliding_window"),
        BlockEvent(EventType.REMOVED, (1,), group=1),
        BlockEvent(EventType.STORED, (2,), group=0, group_kind="full_attention"),
        BlockEvent(EventType.REMOVED, (2,), group=0),
        BlockEvent(EventType.STORED, (3,)),
    )


def test_a_deeply_nested_payload_is_a_decode_error_not_an_error(rig: Rig) -> None:
    """10,000 nested msgpack arrays, as the whole payload and as one event: malformed messages
    (decode_errors), never the thread's unexpected errors."""
    s = rig.warm_up()
    deep = b"\x91" * 10_000 + b"\xc0"
    rig.engine.publish(s, deep)
    rig.engine.publish(s + 1, b"\x92\xcb" + _encode(1.0)[1:] + b"\x91" + deep)  # [1.0, [[[...]]]]
    rig.engine.publish(s + 2, batch(3.0, [removed([3])]))
    got = rig.got.wait_seq(s + 2)
    assert [b.seq for b in got[-2:]] == [s - 1, s + 2]
    stats = rig.sub.stats()
    assert (stats["decode_errors"], stats["errors"]) == (2, 0)
    with pytest.raises(KVEventDecodeError, match="nested too deeply"):
        KVEventDecoder().decode(b"\x92\xcb" + _encode(1.0)[1:] + b"\x91" + deep, epoch="e", seq=0)


def test_an_unknown_event_type_is_skipped_and_counted(rig: Rig) -> None:
    s = rig.warm_up()
    rig.engine.publish(s, batch(1.0, [["BlockPinned", [7]], removed([8]), {"type": "Other", "x": 1}]))
    assert rig.got.wait_seq(s)[-1].events == (BlockEvent(EventType.REMOVED, (8,)),)
    assert rig.sub.stats()["skipped_unknown"] == 2


# -- (e) a dropped range is filled from the replay socket --------------------------------------


@pytest.mark.parametrize("rig", [{"replay": "topic"}, {"replay": "seq"}], indirect=True, ids=["vllm", "sglang"])
def test_a_dropped_range_is_filled_from_the_replay_socket(rig: Rig) -> None:
    s = rig.warm_up()
    rig.engine.publish(s, batch(10.0, [stored([1])]))
    rig.got.wait_seq(s)
    for k in (1, 2, 3):
        rig.engine.drop(s + k, batch(10.0 + k, [removed([k])]))
    rig.engine.publish(s + 4, batch(14.0, [stored([4])]))
    rig.engine.publish(s + 5, batch(15.0, [stored([5])]))
    got = rig.got.wait_seq(s + 5)
    tail = got[-6:]
    assert [b.seq for b in tail] == [s, s + 1, s + 2, s + 3, s + 4, s + 5]
    assert [b.ts for b in tail] == [10.0, 11.0, 12.0, 13.0, 14.0, 15.0]
    assert tail[2].events == (BlockEvent(EventType.REMOVED, (2,)),)
    assert len({b.epoch for b in got}) == 1
    assert rig.engine.replay_requests == [s + 1]
    stats = rig.sub.stats()
    assert (stats["gaps"], stats["gaps_filled"], stats["replayed"], stats["replay_requests"]) == (1, 1, 3, 1)


# -- (f) an unfilled gap stays visible ---------------------------------------------------------


@pytest.mark.parametrize(
    "rig",
    [{"replay": None, "use_replay": False}, {"replay": "silent", "kw": {"replay_timeout_s": 0.2}}],
    indirect=True,
    ids=["no-replay-endpoint", "replay-does-not-answer"],
)
def test_without_a_replay_the_jumped_batch_keeps_its_seq(rig: Rig) -> None:
    s = rig.warm_up()
    rig.engine.drop(s, batch(1.0, [removed([1])]))
    rig.engine.drop(s + 1, batch(2.0, [removed([2])]))
    rig.engine.publish(s + 2, batch(3.0, [removed([3])]))
    rig.engine.publish(s + 3, batch(4.0, [removed([4])]))
    got = rig.got.wait_seq(s + 3)
    assert [b.seq for b in got[-3:]] == [s - 1, s + 2, s + 3]
    stats = rig.sub.stats()
    assert (stats["gaps"], stats["gaps_filled"], stats["replayed"]) == (1, 0, 0)


def test_a_partial_replay_delivers_what_it_has_and_keeps_the_rest_a_gap(rig: Rig) -> None:
    s = rig.warm_up()
    rig.engine.drop(s + 1, batch(2.0, [removed([2])]))  # s itself is gone from the engine's buffer
    rig.engine.publish(s + 2, batch(3.0, [removed([3])]))
    got = rig.got.wait_seq(s + 2)
    assert [b.seq for b in got[-3:]] == [s - 1, s + 1, s + 2]
    stats = rig.sub.stats()
    assert (stats["gaps"], stats["gaps_filled"], stats["replayed"]) == (1, 0, 1)


# -- (g) an engine restart is a new epoch -------------------------------------------------------


def test_seq_back_to_zero_starts_a_new_epoch(rig: Rig) -> None:
    s = rig.warm_up()
    n = len(rig.got.batches)
    rig.engine.publish(s, batch(1.0, [stored([1])]))
    rig.engine.publish(0, batch(2.0, [stored([2])]))  # the engine restarted
    rig.engine.publish(1, batch(3.0, [stored([3])]))
    got = rig.got.wait_for(lambda bs: len(bs) >= n + 3)
    before, after = got[-3], got[-2:]
    assert [b.seq for b in got[-3:]] == [s, 0, 1]
    assert before.seq == s
    assert after[0].epoch == after[1].epoch != before.epoch
    assert before.epoch.endswith("-0") and after[0].epoch.endswith("-1")
    assert after[0].epoch.rsplit("-", 1)[0] == before.epoch.rsplit("-", 1)[0]
    assert rig.sub.epoch == after[0].epoch
    stats = rig.sub.stats()
    assert (stats["restarts"], stats["gaps"], stats["last_seq"]) == (1, 0, 1)


def test_a_restarted_engine_that_published_past_the_last_seq_is_a_new_epoch(
    ctx: zmq.Context[zmq.Socket[bytes]],
) -> None:
    """While the subscriber was cut off, the engine restarted and published more batches than
    before: its seq moves forward, but the dropped connection says it may be another process."""
    rig = Rig(ctx, replay="topic", use_replay=True)
    try:
        s = rig.warm_up()
        rig.engine.publish(s, batch(1.0, [stored([1])]))
        n = len(rig.got.wait_seq(s))
        rig.engine.close()  # the engine process dies
        wait_until(lambda: rig.sub.stats()["disconnects"] >= 1)
        rig.engine = FakeEngine(ctx, replay=None, port=int(rig.engine.endpoint.rsplit(":", 1)[1]))
        rig.next_seq = s + 1000
        rig.warm_up()
        got = rig.got.batches
        assert {b.epoch for b in got[:n]} == {got[0].epoch}
        assert {b.epoch for b in got[n:]} == {got[0].epoch.rsplit("-", 1)[0] + "-1"}
        assert [b.seq for b in got[n:]] == list(range(got[n].seq, rig.next_seq))
        stats = rig.sub.stats()
        # the first batch after the reconnect asked the (dead) replay socket to prove continuity
        assert (stats["restarts"], stats["gaps"], stats["replay_requests"]) == (1, 0, 1)
        assert (stats["continuity_unproven"], stats["continuity_proven"]) == (1, 0)
    finally:
        rig.close()


class StoreSink(Collector):
    """deliver() into an attribution store, as the owner does."""

    def __init__(self) -> None:
        super().__init__()
        self.store = AttributionStore(window_s=1000.0, bucket_s=10.0, max_lag_s=1e12, filter_bits=1 << 16)

    def __call__(self, worker: str, b: EventBatch) -> None:
        self.store.apply(worker, b)  # no reorder grace in this store: a jump is a gap at once
        super().__call__(worker, b)


@pytest.mark.parametrize("replay", [None, "topic"], ids=["no-replay-endpoint", "replay-of-the-new-process"])
def test_a_restart_that_lost_its_first_batches_is_a_new_epoch(
    ctx: zmq.Context[zmq.Socket[bytes]], replay: str | None
) -> None:
    """The engine publishes one batch (seq 0, storing block 1) and restarts; the new process's
    seq 0 is lost while the subscriber reconnects (slow joiner) and its seq 1 arrives: exactly the
    next seq, but continuity is not proven (no replay endpoint; or the replay of seq 0 is the new
    process's, not what was received), so a new epoch begins and block 1, stored only by the old
    process, is unknown, never resident with a complete resident set."""
    engine = FakeEngine(ctx, replay, xpub=True)
    sink = StoreSink()
    sub = KVEventSubscriber(
        "w", engine.endpoint, sink, replay_endpoint=engine.replay_endpoint, topic=TOPIC, context=ctx
    )
    sub.start()
    try:
        engine.wait_subscribed()
        engine.publish(0, batch(1.0, [stored([1])]))
        sink.wait_seq(0)
        before = sink.store.lookup("w", 1)
        assert before.outcome == "resident"
        port, replay_port = (int(e.rsplit(":", 1)[1]) if e else 0 for e in (engine.endpoint, engine.replay_endpoint))
        engine.close()  # the engine process dies
        wait_until(lambda: sub.stats()["disconnects"] >= 1)
        engine = FakeEngine(ctx, replay, port, replay_port=replay_port, xpub=True)
        engine.wait_subscribed()
        engine.drop(0, batch(2.0, [stored([100])]))  # the new process's seq 0: lost
        engine.publish(1, batch(3.0, []))
        got = sink.wait_seq(1)
        answer = sink.store.lookup("w", 1)
        assert answer.outcome == "unknown", answer
        assert [b.seq for b in got] == [0, 1] and got[1].epoch != got[0].epoch and got[1].epoch.endswith("-1")
        (stats,) = sink.store.stats().values()
        assert stats["resident_set_complete"] is False and stats["counts"]["restarts"] == 1
        counted = sub.stats()
        assert (counted["restarts"], counted["continuity_unproven"], counted["continuity_proven"]) == (1, 1, 0)
        assert counted["replay_requests"] == (0 if replay is None else 1)
    finally:
        sub.stop()
        engine.close()


def test_a_reconnect_to_the_same_engine_keeps_the_epoch_when_its_replay_proves_it(
    ctx: zmq.Context[zmq.Socket[bytes]],
) -> None:
    """The same engine process drops the connection (a network blip) and goes on: the replay of the
    last seq received is byte for byte what was received, so the epoch goes on; the batch lost
    during the blip comes from the same replay answer, in order."""
    engine = FakeEngine(ctx, "topic", xpub=True)
    sink = StoreSink()
    sub = KVEventSubscriber(
        "w",
        engine.endpoint,
        sink,
        replay_endpoint=engine.replay_endpoint,
        topic=TOPIC,
        context=ctx,
        replay_timeout_s=WAIT_S,
    )
    sub.start()
    try:
        engine.wait_subscribed()
        engine.publish(0, batch(1.0, [stored([1, 2])]))
        sink.wait_seq(0)
        engine.reopen()
        wait_until(lambda: sub.stats()["disconnects"] >= 1)
        engine.wait_subscribed()
        engine.drop(1, batch(2.0, [removed([1])]))  # sent while the subscriber was away
        engine.publish(2, batch(3.0, [stored([3])]))
        got = sink.wait_seq(2)
        assert [b.seq for b in got] == [0, 1, 2]
        assert len({b.epoch for b in got}) == 1
        assert engine.replay_requests == [0]
        assert [sink.store.lookup("w", k).outcome for k in (1, 2, 3)] == ["evicted", "resident", "resident"]
        counted = sub.stats()
        assert (counted["restarts"], counted["continuity_proven"], counted["gaps_filled"]) == (0, 1, 1)
    finally:
        sub.stop()
        engine.close()


# -- (h) a malformed message is counted and skipped --------------------------------------------


def test_a_malformed_payload_is_counted_and_the_subscriber_goes_on(rig: Rig) -> None:
    s = rig.warm_up()
    rig.engine.publish(s, b"\xc1")  # not msgpack
    rig.engine.publish(s + 1, _encode([1.0, [["BlockStored"]]]))  # an event without its hashes
    rig.engine.pub.send_multipart([rig.engine.topic, b"\x00\x01", b""])  # a 2-byte seq
    rig.engine.publish(s + 2, batch(3.0, [removed([3])]))
    got = rig.got.wait_seq(s + 2)
    assert [b.seq for b in got[-2:]] == [s - 1, s + 2]  # the store sees s and s + 1 missing
    stats = rig.sub.stats()
    assert (stats["decode_errors"], stats["gaps"], stats["errors"]) == (3, 0, 0)
    assert rig.sub.running


def test_a_failing_deliver_is_counted_and_the_subscriber_goes_on(ctx: zmq.Context[zmq.Socket[bytes]]) -> None:
    engine = FakeEngine(ctx, replay=None)
    got = Collector()

    def deliver(worker: str, b: EventBatch) -> None:
        if b.events == (BlockEvent(EventType.REMOVED, (666,)),):
            raise RuntimeError("the store said no")
        got(worker, b)

    sub = KVEventSubscriber("w", engine.endpoint, deliver, topic=TOPIC, context=ctx)
    sub.start()
    try:
        seq = 0
        while not got.batches:
            engine.publish(seq, batch(0.0, []))
            seq += 1
            time.sleep(0.01)
        engine.publish(seq, batch(1.0, [removed([666])]))
        engine.publish(seq + 1, batch(2.0, [removed([1])]))
        assert got.wait_seq(seq + 1)[-1].events == (BlockEvent(EventType.REMOVED, (1,)),)
        assert sub.stats()["deliver_errors"] == 1
    finally:
        sub.stop()
        engine.close()


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\xc1",
        _encode([1.0]),
        _encode(["x", []]),
        _encode([float("nan"), []]),
        _encode([1.0, [["BlockRemoved", [b""]]]]),
        _encode([1.0, [["BlockRemoved", ["x"]]]]),
        _encode([1.0, [7]]),
        _encode({"events": []}),
        _encode([1.0, [["BlockRemoved", [1], "GPU", -1]]]),  # a negative group
        _encode([1.0, [["BlockRemoved", [1], "GPU", "full"]]]),  # a group that is not a number
        b"\x91" * 10_000 + b"\xc0",
    ],
)
def test_malformed_payloads_raise_the_decode_error(payload: bytes) -> None:
    with pytest.raises(KVEventDecodeError, match="malformed KV-event message"):
        KVEventDecoder().decode(payload, epoch="e", seq=0)


# -- (i) stop() ---------------------------------------------------------------------------------


def test_stop_is_prompt_even_during_a_replay_and_closes_the_sockets(ctx: zmq.Context[zmq.Socket[bytes]]) -> None:
    rig = Rig(ctx, replay="silent", use_replay=True, replay_timeout_s=60.0)
    try:
        s = rig.warm_up()
        rig.engine.publish(s + 1, batch(1.0, []))  # a gap: the subscriber waits on a silent replay
        wait_until(lambda: rig.engine.replay_requests == [s])
        rig.sub.stop()  # waits at most 2 s for the thread, which would wait 60 s on the replay
        assert not rig.sub.running
        rig.sub.stop()  # twice is fine
    finally:
        rig.close()
    # the ctx fixture then checks that term() finds no socket left open


def test_stop_before_start_and_start_twice(ctx: zmq.Context[zmq.Socket[bytes]]) -> None:
    sub = KVEventSubscriber("w", "tcp://127.0.0.1:1", Collector(), context=ctx)
    sub.stop()
    assert not sub.running and sub.epoch is None and sub.stats()["last_seq"] == -1
    sub2 = KVEventSubscriber("w", "tcp://127.0.0.1:1", Collector(), context=ctx)
    sub2.start()
    try:
        with pytest.raises(RuntimeError, match="already started"):
            sub2.start()
    finally:
        sub2.stop()
    with pytest.raises(ValueError, match="cannot subscribe"):
        KVEventSubscriber("w", "nonsense://x", Collector(), context=ctx).start()


def test_an_ipv6_endpoint(ctx: zmq.Context[zmq.Socket[bytes]]) -> None:
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub.setsockopt(zmq.IPV6, 1)
    try:
        port = pub.bind_to_random_port("tcp://[::1]")
    except zmq.ZMQError:
        pub.close()
        pytest.skip("no IPv6 loopback here")
    got = Collector()
    sub = KVEventSubscriber("w", f"tcp://[::1]:{port}", got, context=ctx)
    sub.start()
    try:
        deadline = time.monotonic() + WAIT_S
        seq = 0
        while not got.batches:
            assert time.monotonic() < deadline, "nothing arrived over IPv6"
            pub.send_multipart([b"", seq.to_bytes(8, "big"), batch(1.0, [removed([seq])])])
            seq += 1
            time.sleep(0.01)
    finally:
        sub.stop()
        pub.close()


# -- (j) the endpoint setting ------------------------------------------------------------------


def test_parse_endpoints_valid() -> None:
    text = """
        worker-a=tcp://10.0.0.5:5557|tcp://10.0.0.5:5558#kv@10.0.0.5@llama ;
        worker-b = tcp://vllm-b.svc:5557 ;;
        w.c:1=ipc:///run/vllm/kv.sock
        w_d=tcp://[::1]:5557|inproc://replay-d#
    """
    assert parse_endpoints(text) == [
        SubscriberEndpoint("worker-a", "tcp://10.0.0.5:5557", "tcp://10.0.0.5:5558", "kv@10.0.0.5@llama"),
        SubscriberEndpoint("worker-b", "tcp://vllm-b.svc:5557"),
        SubscriberEndpoint("w.c:1", "ipc:///run/vllm/kv.sock"),
        SubscriberEndpoint("w_d", "tcp://[::1]:5557", "inproc://replay-d"),
    ]
    assert parse_endpoints("") == []
    assert parse_endpoints(" ; \n ") == []


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("worker-a", "want WORKER=ENDPOINT"),
        ("=tcp://h:1", "worker name ''"),
        ("a b=tcp://h:1", "worker name 'a b'"),
        ("a=tcp://h:1;a=tcp://h:2", "listed twice"),
        ("a=", "an endpoint is empty"),
        ("a=tcp://h:1|", "an endpoint is empty"),
        ("a=tcp://h:1|tcp://h:2|tcp://h:3", "at most two endpoints"),
        ("a=tcp://*:5557", "bind address"),
        ("a=tcp://h", "not tcp://HOST:PORT"),
        ("a=tcp://h:0", "not in 1..65535"),
        ("a=tcp://h:70000", "not in 1..65535"),
        ("a=http://h:1", "must start with tcp://"),
        ("a=ipc://", "has no name"),
        ("a=tcp://h:1;b=tcp://h:1", "already used by worker 'a'"),
        ("a=tcp://h:1|tcp://h:1", "already used by worker 'a'"),
    ],
)
def test_parse_endpoints_invalid(text: str, why: str) -> None:
    with pytest.raises(ValueError, match="endpoint entry") as e:
        parse_endpoints(text)
    assert why in str(e.value)
    assert repr(text.split(";")[-1].strip()) in str(e.value)  # the bad entry is named


def test_catch_up_delivers_the_start_of_an_epoch_joined_late(ctx: zmq.Context[zmq.Socket[bytes]]) -> None:
    """The engine has published seqs 0-4 before the subscriber listens; with catch_up the first
    batch heard (seq k >= 5) makes it ask the replay socket for 0..k-1, delivered first and in
    order in the same epoch, so the store sees the epoch from seq 0."""
    engine = FakeEngine(ctx, "topic")
    for seq in range(5):
        engine.drop(seq, batch(float(seq), [stored([seq])]))
    got = Collector()
    sub = KVEventSubscriber(
        "worker-a",
        engine.endpoint,
        got,
        replay_endpoint=engine.replay_endpoint,
        topic=TOPIC,
        context=ctx,
        catch_up=True,
    )
    sub.start()
    try:
        seq = 5
        deadline = time.monotonic() + WAIT_S
        while not got.batches:  # slow joiner: publish until heard
            assert time.monotonic() < deadline, "the subscriber never received a batch"
            engine.publish(seq, batch(float(seq), [stored([seq])]))
            seq += 1
            time.sleep(0.01)
        wait_until(lambda: sub.stats()["caught_up"] > 0)
        k = sub.stats()["caught_up"]  # the seq first heard live: 0 .. k-1 came from the replay socket
        assert k >= 5
        delivered = got.wait_for(lambda bs: len(bs) >= k + 1)  # more may follow: the loop may publish on
        assert [b.seq for b in delivered[: k + 1]] == list(range(k + 1))
        assert [b.events for b in delivered[:5]] == [(BlockEvent(EventType.STORED, (s,)),) for s in range(5)]
        assert len({b.epoch for b in delivered}) == 1
        assert engine.replay_requests == [0]
        assert sub.stats()["replayed"] == k
    finally:
        sub.stop()
        engine.close()
