"""A subscriber to one worker's vLLM / SGLang ZMQ KV-event stream: it turns the engine's batches
into the store's :class:`~litehit.attribution.events.EventBatch` objects and hands them, in
``seq`` order, to ``deliver(worker, batch)``.

Sequence and epochs. The engine numbers its batches from 0 each time its process starts. The
first batch this subscriber sees starts its epoch 0 (``zmq-<start time ns>-0``); a ``seq`` that
does not move forward (the same or a smaller one) means the engine restarted, and starts the next
epoch (``...-1``, ``...-2``). After the connection to the engine dropped, continuity is proven,
never assumed: a restarted engine whose first batches were lost (PUB/SUB drops what is published
before the subscriber has reconnected) may go on with exactly the next ``seq``. So the first batch
after a reconnect keeps the epoch only when the worker has a replay endpoint and its replay of
the last ``seq`` received before the drop is byte for byte what was received (the batch carries
the engine's timestamp: a restarted engine's batch of that number differs); the batches between
come from the same replay answer. Without a replay endpoint, or when the replay differs or does
not answer, the reconnect starts a new epoch (a network blip thus costs an epoch, never a wrong
history). Otherwise, a ``seq`` that jumps forward by more than 1 is a gap: when the worker has a
replay endpoint, the missing batches are requested from the engine's replay socket and delivered
(in order, only the missing ones) before the batch that jumped; whatever the replay cannot supply
in ``replay_timeout_s`` stays a gap, and the jumped batch is delivered with its real ``seq``, so
the store sees the jump. A payload that cannot be decoded is counted and logged and nothing is
delivered for its ``seq`` (the store sees that as a gap too).

Replay protocol (the engine's ROUTER socket): the request is one frame, the first wanted ``seq``
(8 bytes, big-endian), behind the REQ envelope's empty delimiter. The engine answers with one
message per buffered batch from that ``seq`` on, ``[topic, seq, payload]`` (vLLM since its replay
carries the topic) or ``[seq, payload]`` (older vLLM, SGLang), and ends with a message whose last
frame is empty (its ``seq`` frame is 8 bytes of 0xFF, i.e. -1). Several answers arrive for one
request, which a REQ socket cannot take, so this subscriber speaks through a DEALER socket and
writes the empty delimiter itself.

A subscriber runs one daemon thread; nothing raises out of it: errors are logged and counted in
:meth:`KVEventSubscriber.stats`.

Endpoints for several workers come from one setting, parsed by :func:`parse_endpoints`.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import zmq

from litehit.attribution.events import EventBatch
from litehit.attribution.kv_events import DEFAULT_MEDIA, KVEventDecoder
from litehit.errors import KVEventDecodeError

__all__ = ["KVEventSubscriber", "SubscriberEndpoint", "parse_endpoints"]

logger = logging.getLogger(__name__)

Deliver = Callable[[str, EventBatch], None]

_END_SEQ = b"\xff" * 8  # the seq frame of the end-of-replay message: -1 as 8 signed bytes
_POLL_S = 0.05  # how long the thread waits on its sockets before it looks at the stop flag again
_RCVHWM = 100_000  # live batches queued while a replay or a slow deliver() holds the thread
_STOP_JOIN_S = 2.0  # how long stop() waits for the thread to leave a deliver() call

_COUNTERS = (
    "batches",  # batches delivered (live and replayed)
    "events",  # events delivered
    "skipped_medium",  # events left out by the medium filter
    "skipped_unknown",  # events of a type the decoder does not know
    "decode_errors",  # messages (live or replayed) that could not be decoded
    "deliver_errors",  # deliver() calls that raised
    "errors",  # anything else that went wrong in the thread
    "gaps",  # forward seq jumps
    "gaps_filled",  # gaps whose every missing batch came from the replay socket
    "replayed",  # batches delivered from the replay socket
    "replay_requests",  # replay requests sent
    "restarts",  # a new epoch: seq went backwards, or a reconnect whose continuity was not proven
    "continuity_proven",  # reconnects kept in the epoch: the replay of the last seq matched what was received
    "continuity_unproven",  # reconnects made a new epoch: no replay endpoint, or its answer differed or was missing
    "caught_up",  # batches of an epoch's start, from the replay socket, when joining it late (catch_up)
    "disconnects",  # the connection to the engine dropped
)


class KVEventSubscriber:
    """Subscribes to ``endpoint`` (the engine's PUB socket) for ``worker`` and delivers its
    batches. ``media`` is the medium filter (see :mod:`litehit.attribution.kv_events`; ``None``:
    every medium counts). ``context`` defaults to the process-wide ZMQ context, which is left
    open. Call :meth:`start` once, then :meth:`stop`."""

    def __init__(
        self,
        worker: str,
        endpoint: str,
        deliver: Deliver,
        *,
        replay_endpoint: str | None = None,
        topic: str = "",
        media: Iterable[str | None] | None = DEFAULT_MEDIA,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
        replay_timeout_s: float = 1.0,
        on_disconnect: Callable[[str], None] | None = None,
        catch_up: bool = False,
    ) -> None:
        if replay_timeout_s <= 0:
            raise ValueError(f"replay_timeout_s must be > 0 (got {replay_timeout_s!r})")
        self.worker = worker
        self.on_disconnect = on_disconnect  # told (with the worker) when the connection to the engine drops
        # Joining an epoch after its seq 0: ask the replay socket for the batches before, so the
        # epoch is seen from its start when the engine still buffers them.
        self.catch_up = catch_up
        self.endpoint = endpoint
        self.replay_endpoint = replay_endpoint
        self.topic = topic
        self.replay_timeout_s = replay_timeout_s
        self._deliver = deliver
        self._decoder = KVEventDecoder(media)
        self._context = context if context is not None else zmq.Context.instance()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._sub: zmq.Socket[bytes] | None = None
        self._monitor: zmq.Socket[bytes] | None = None
        self._replay: zmq.Socket[bytes] | None = None
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(_COUNTERS, 0)
        self._last_seq: int | None = None
        self._last_payload = b""  # the payload of _last_seq, to compare with its replay after a reconnect
        self._epoch_base = ""
        self._epoch_n = -1  # no batch seen yet
        self._peer_lost = False  # the connection to the engine dropped since the last batch

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Connects to the engine and starts the thread. Raises ValueError when an endpoint is
        unusable; RuntimeError when already started."""
        if self._thread is not None:
            raise RuntimeError(f"the KV-event subscriber of worker {self.worker!r} was already started")
        sub = self._context.socket(zmq.SUB)
        try:
            sub.setsockopt(zmq.LINGER, 0)
            sub.setsockopt(zmq.IPV6, 1)  # tcp://[::1]:5557 too; IPv4 addresses work either way
            sub.setsockopt(zmq.RCVHWM, _RCVHWM)
            sub.setsockopt(zmq.SUBSCRIBE, self.topic.encode())
            sub.connect(self.endpoint)
            monitor = sub.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        except zmq.ZMQError as e:
            sub.close(linger=0)
            raise ValueError(f"worker {self.worker!r}: cannot subscribe to {self.endpoint!r}: {e}") from None
        # handed over to the thread: Thread.start() is the memory barrier
        self._sub, self._monitor = sub, monitor
        self._epoch_base = f"zmq-{time.time_ns()}"
        self._thread = threading.Thread(target=self._run, name=f"kv-events-{self.worker}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stops the thread and closes its sockets. Returns within about 50 ms unless the thread
        is inside a ``deliver`` call (then it waits up to 2 s for it). Safe to call twice."""
        self._stopping.set()
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return
        thread.join(_STOP_JOIN_S)
        if thread.is_alive():
            logger.warning("KV-event subscriber of worker %r: still inside deliver() after stop()", self.worker)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def epoch(self) -> str | None:
        """The epoch of the batches delivered now; None before the first batch."""
        with self._lock:
            return self._epoch()

    def stats(self) -> dict[str, int]:
        """A snapshot of the counters, and ``last_seq`` (-1 before the first batch)."""
        with self._lock:
            out = dict(self._counts)
            out["last_seq"] = -1 if self._last_seq is None else self._last_seq
        return out

    # -- the thread -------------------------------------------------------------------------

    def _run(self) -> None:
        sub, monitor = self._sub, self._monitor
        assert sub is not None and monitor is not None
        poller = zmq.Poller()
        poller.register(monitor, zmq.POLLIN)
        poller.register(sub, zmq.POLLIN)
        poll_ms = int(_POLL_S * 1000)
        try:
            while not self._stopping.is_set():
                try:
                    ready = dict(poller.poll(poll_ms))
                    if monitor in ready:  # first: a drop precedes whatever the new connection brings
                        self._on_monitor_event(monitor.recv_multipart())
                        continue
                    if sub not in ready:
                        continue
                    frames = sub.recv_multipart()
                except zmq.ContextTerminated:
                    break
                try:
                    self._on_message(frames)
                except Exception:
                    self._count("errors")
                    logger.exception("KV-event subscriber of worker %r: unexpected error", self.worker)
        except Exception:
            self._count("errors")
            logger.exception("KV-event subscriber of worker %r: stopped by an error", self.worker)
        finally:
            self._close_replay()
            with contextlib.suppress(zmq.ZMQError):
                sub.disable_monitor()
            monitor.close(linger=0)
            sub.close(linger=0)
            self._sub = self._monitor = None

    def _on_monitor_event(self, frames: list[bytes]) -> None:
        """A socket event: ``[2-byte event id + 4-byte value, endpoint]`` (little-endian)."""
        if frames and int.from_bytes(frames[0][:2], "little") == zmq.EVENT_DISCONNECTED:
            logger.info("KV events of worker %r: the connection to %s dropped", self.worker, self.endpoint)
            with self._lock:
                self._counts["disconnects"] += 1
                self._peer_lost = True
            if self.on_disconnect is not None:
                try:
                    self.on_disconnect(self.worker)
                except Exception:
                    logger.exception("KV events of worker %r: on_disconnect failed", self.worker)
                    with self._lock:
                        self._counts["errors"] += 1

    def _on_message(self, frames: list[bytes]) -> None:
        if len(frames) != 3 or len(frames[1]) != 8:
            self._decode_error(None, f"{len(frames)} frames (want [topic, 8-byte seq, payload])")
            return
        seq = int.from_bytes(frames[1], "big")
        payload = frames[2]
        with self._lock:
            last, lost = self._last_seq, self._peer_lost
            self._peer_lost = False
        if last is None or seq <= last:
            new_epoch = True
        elif lost:  # after a dropped connection, only a proof keeps the epoch
            new_epoch = not self._continues(last, seq)
        else:
            new_epoch = False
            if seq > last + 1:
                self._count("gaps")
                logger.info("KV events of worker %r: seq %d follows %d (a gap)", self.worker, seq, last)
                if self.replay_endpoint is not None:
                    self._fill_gap(last + 1, seq)
        if new_epoch:
            with self._lock:
                if last is not None:
                    self._counts["restarts"] += 1
                self._epoch_n += 1
            if seq > 0 and self.catch_up and self.replay_endpoint is not None:
                self._catch_up(seq)
        with self._lock:
            self._last_seq, self._last_payload = seq, payload
        self._decode_and_deliver(seq, payload, replayed=False)

    def _continues(self, last: int, seq: int) -> bool:
        """After a reconnect, whether batch ``seq`` (> ``last``) is of the engine process that sent
        ``last``: its replay of ``last`` must be what was received. When it is, the batches between
        (from the same replay answer) are delivered and any still missing stay a gap."""
        got = self._request_replay(last, seq) if self.replay_endpoint is not None else {}
        if last not in got or got[last] != self._last_payload:
            self._count("continuity_unproven")
            why = (
                "no replay endpoint"
                if self.replay_endpoint is None
                else "its replay does not have it"
                if last not in got
                else "its replay differs"
            )
            logger.info(
                "KV events of worker %r: reconnected at seq %d; the same engine process cannot be proven (%s of seq "
                "%d): a new epoch",
                self.worker,
                seq,
                why,
                last,
            )
            return False
        self._count("continuity_proven")
        if seq > last + 1:
            self._count("gaps")
            missing = range(last + 1, seq)
            for s in missing:
                if s in got:
                    self._decode_and_deliver(s, got[s], replayed=True)
            if all(s in got for s in missing):
                self._count("gaps_filled")
        return True

    def _decode_and_deliver(self, seq: int, payload: bytes, *, replayed: bool) -> None:
        with self._lock:
            epoch = self._epoch()
        assert epoch is not None
        try:
            decoded = self._decoder.decode(payload, epoch=epoch, seq=seq)
        except KVEventDecodeError as e:
            self._decode_error(seq, e.reason)
            return
        with self._lock:
            c = self._counts
            c["skipped_medium"] += decoded.skipped_medium
            c["skipped_unknown"] += decoded.skipped_unknown
            c["batches"] += 1
            c["events"] += len(decoded.batch.events)
            if replayed:
                c["replayed"] += 1
        try:
            self._deliver(self.worker, decoded.batch)
        except Exception:
            self._count("deliver_errors")
            logger.exception("KV events of worker %r: deliver() failed on seq %d", self.worker, seq)

    def _catch_up(self, end: int) -> None:
        """Joining an epoch at seq ``end``: delivers the batches before it that the replay socket
        still has, the longest run that ends at ``end - 1`` (from seq 0 when it buffers them all)."""
        got = self._request_replay(0, end)
        start = end
        while start - 1 in got:
            start -= 1
        for seq in range(start, end):
            self._decode_and_deliver(seq, got[seq], replayed=True)
        with self._lock:
            self._counts["caught_up"] += end - start
        logger.info("KV events of worker %r: joined at seq %d, caught up from seq %d", self.worker, end, start)

    def _fill_gap(self, first: int, end: int) -> None:
        """Asks the replay socket for seqs ``first`` .. ``end - 1`` and delivers what it sends."""
        got = self._request_replay(first, end)
        for seq in sorted(got):
            self._decode_and_deliver(seq, got[seq], replayed=True)
        if len(got) == end - first:
            self._count("gaps_filled")
        else:
            logger.warning(
                "KV events of worker %r: replay supplied %d of the %d missing batches (seq %d..%d)",
                self.worker,
                len(got),
                end - first,
                first,
                end - 1,
            )

    def _request_replay(self, first: int, end: int) -> dict[int, bytes]:
        """The payloads of seqs in [first, end) the replay socket sends before its end marker or
        the timeout. A replay cut short leaves its socket closed, so late answers are dropped."""
        got: dict[int, bytes] = {}
        try:
            replay = self._replay_socket()
            replay.send_multipart([b"", first.to_bytes(8, "big")], flags=zmq.NOBLOCK)
        except zmq.ZMQError as e:
            logger.warning("KV events of worker %r: replay request failed: %s", self.worker, e)
            self._close_replay()
            return got
        self._count("replay_requests")
        deadline = time.monotonic() + self.replay_timeout_s
        while not self._stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not replay.poll(int(min(left, _POLL_S) * 1000) + 1):
                continue
            frames = replay.recv_multipart()
            if frames and frames[0] == b"":
                frames = frames[1:]  # the delimiter of the REQ envelope
            if not frames or not frames[-1] or (len(frames) >= 2 and frames[-2] == _END_SEQ):
                return got  # end of replay
            if len(frames) not in (2, 3) or len(frames[-2]) != 8:
                self._decode_error(None, f"a replay answer of {len(frames)} frames")
                continue
            seq = int.from_bytes(frames[-2], "big")
            if first <= seq < end:
                got[seq] = frames[-1]
        self._close_replay()
        return got

    def _replay_socket(self) -> zmq.Socket[bytes]:
        if self._replay is None:
            assert self.replay_endpoint is not None
            replay = self._context.socket(zmq.DEALER)
            replay.setsockopt(zmq.LINGER, 0)
            replay.setsockopt(zmq.IPV6, 1)
            try:
                replay.connect(self.replay_endpoint)
            except zmq.ZMQError:
                replay.close(linger=0)
                raise
            self._replay = replay
        return self._replay

    def _close_replay(self) -> None:
        if self._replay is not None:
            self._replay.close(linger=0)
            self._replay = None

    # -- bookkeeping ------------------------------------------------------------------------

    def _epoch(self) -> str | None:
        return None if self._epoch_n < 0 else f"{self._epoch_base}-{self._epoch_n}"

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def _decode_error(self, seq: int | None, reason: str) -> None:
        with self._lock:
            self._counts["decode_errors"] += 1
            n = self._counts["decode_errors"]
        if n & (n - 1) == 0:  # the 1st, 2nd, 4th, 8th... : a flood of bad messages stays readable
            where = "" if seq is None else f" seq {seq}"
            logger.warning(
                "KV events of worker %r:%s malformed (%s); %d malformed so far", self.worker, where, reason, n
            )


# -- the endpoint setting -------------------------------------------------------------------

_WORKER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*\Z")
_TCP = re.compile(r"tcp://(?P<host>\[[0-9A-Fa-f:.]+\]|[^:/\[\]\s]+):(?P<port>[0-9]+)\Z")


@dataclass(frozen=True, slots=True)
class SubscriberEndpoint:
    """Where one worker's engine publishes its KV events."""

    worker: str
    endpoint: str  # the engine's PUB socket
    replay_endpoint: str | None = None  # the engine's replay (ROUTER) socket, if it has one
    topic: str = ""  # the subscription prefix; "" takes every topic


def parse_endpoints(text: str) -> list[SubscriberEndpoint]:
    """The workers of an endpoint setting, in order. Syntax::

        WORKER=ENDPOINT[|REPLAY_ENDPOINT][#TOPIC] ; WORKER=... ; ...

    e.g. ``worker-a=tcp://10.0.0.5:5557|tcp://10.0.0.5:5558#kv-events;worker-b=tcp://10.0.0.6:5557``.
    Entries are separated by ``;`` or new lines; blanks around the parts are ignored, and so are
    empty entries. A worker name is letters, digits and ``_ . : -`` (starting with a letter or
    digit), each name at most once. An endpoint is ``tcp://HOST:PORT`` (an address to connect
    to: no ``*``), ``ipc://PATH`` or ``inproc://NAME``, each used by one worker only. The topic is
    the rest of the entry after the first ``#`` (vLLM's ``topic`` setting; empty: every topic).
    Raises ValueError naming the bad entry and why."""
    out: list[SubscriberEndpoint] = []
    owners: dict[str, str] = {}
    for raw in re.split(r"[;\n]", text):
        entry = raw.strip()
        if not entry:
            continue
        worker, eq, rest = entry.partition("=")
        worker = worker.strip()
        if not eq:
            raise ValueError(f"endpoint entry {entry!r}: want WORKER=ENDPOINT[|REPLAY_ENDPOINT][#TOPIC]")
        if not _WORKER.match(worker):
            raise ValueError(
                f"endpoint entry {entry!r}: worker name {worker!r} must be letters, digits and _ . : - "
                "(starting with a letter or digit)"
            )
        if any(e.worker == worker for e in out):
            raise ValueError(f"endpoint entry {entry!r}: worker {worker!r} is listed twice")
        addresses, _, topic = rest.partition("#")
        parts = [p.strip() for p in addresses.split("|")]
        if len(parts) > 2:
            raise ValueError(f"endpoint entry {entry!r}: at most two endpoints (PUB|REPLAY), got {len(parts)}")
        for address in parts:
            problem = _endpoint_problem(address)
            if problem:
                raise ValueError(f"endpoint entry {entry!r}: {problem}")
            if address in owners:
                raise ValueError(f"endpoint entry {entry!r}: {address} is already used by worker {owners[address]!r}")
            owners[address] = worker
        out.append(SubscriberEndpoint(worker, parts[0], parts[1] if len(parts) == 2 else None, topic.strip()))
    return out


def _endpoint_problem(address: str) -> str | None:
    """Why ``address`` cannot be connected to, or None when it can."""
    if not address:
        return "an endpoint is empty"
    if address.startswith("tcp://"):
        m = _TCP.match(address)
        if not m:
            return f"{address!r} is not tcp://HOST:PORT"
        if m["host"] == "*":
            return f"{address!r} is a bind address; give the engine's host"
        if not 0 < int(m["port"]) < 65536:
            return f"{address!r}: port {m['port']} is not in 1..65535"
        return None
    for scheme in ("ipc://", "inproc://"):
        if address.startswith(scheme):
            return (
                None
                if len(address) > len(scheme) and not any(c.isspace() for c in address)
                else f"{address!r} has no name"
            )
    return f"{address!r} must start with tcp://, ipc:// or inproc://"
