"""``litehit attribution``: live miss attribution without a server.

- ``replay LOG``: runs an event log (KV-event batches and lookups, one JSON per line) through
  the same store as the attribution owner, with the log's timestamps as the clock, and reports
  every lookup's outcome (evicted / no_recent_match / resident / not_a_miss / unknown).
- ``record``: subscribes to vLLM/SGLang ZMQ KV-event publishers and writes what they publish as
  an event log (published atomically when recording stops).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from litehit.cli.commands import COMMAND_HELP
from litehit.errors import ConfigError, ConfigIssue

__all__ = ["add_parser"]

_OUTCOMES = ("resident", "evicted", "no_recent_match", "not_a_miss", "unknown")


def add_parser(sub: Any) -> None:
    from litehit.settings import Settings

    defaults = Settings.model_fields
    p = sub.add_parser(
        "attribution",
        help=COMMAND_HELP["attribution"],
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = p.add_subparsers(dest="attribution_command", required=True, metavar="SUBCOMMAND")

    r = commands.add_parser(
        "replay",
        help="answer an event log's lookups with the owner's store (timestamps as the clock)",
        description=(
            "Each line of LOG is an event batch {worker, epoch, seq, ts, events} (the HTTP event body plus\n"
            "its worker) or a lookup {lookup: {worker, block_hash, ...}, ts}. Batches are applied and lookups\n"
            "answered in order, with the largest ts so far as the clock (no consumer lag). Prints the\n"
            "outcomes per worker; -o writes one JSON answer per lookup."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("source", metavar="LOG", help="the event log (.jsonl; '-' reads standard input)")
    r.add_argument("--window-s", type=float, default=defaults["attribution_window_s"].default)
    r.add_argument("--bucket-s", type=float, default=defaults["attribution_bucket_s"].default)
    r.add_argument("--max-lag-s", type=float, default=defaults["attribution_max_lag_s"].default)
    r.add_argument(
        "--filter-bits",
        type=int,
        default=defaults["attribution_filter_bits"].default,
        help="bits of each worker's aged-evidence filter (a power of two >= 64, or 0 for none)",
    )
    r.add_argument(
        "--reorder-grace-s",
        type=float,
        default=defaults["attribution_reorder_grace_s"].default,
        help="how long a batch ahead of a missing seq is held for it (log clock; 0: a jump is a gap at once)",
    )
    r.add_argument("-o", "--output", type=Path, help="write every lookup's answer here (.jsonl, atomically)")
    r.add_argument("--format", choices=("table", "json"), default="table", help="the printed summary")
    r.set_defaults(func=_replay)

    c = commands.add_parser(
        "record",
        help="write the KV events of ZMQ publishers as an event log",
        description=(
            "Subscribes to every worker of --zmq (the LITEHIT_ATTRIBUTION_ZMQ syntax:\n"
            "WORKER=tcp://HOST:PORT[|tcp://HOST:REPLAY_PORT][#TOPIC];...) and writes each batch as a line\n"
            "of an event log, until Ctrl-C, --seconds or --batches. The log is published atomically when\n"
            "recording stops."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("--zmq", required=True, help="the publishers, per worker")
    c.add_argument("--seconds", type=float, help="stop after this long")
    c.add_argument("--batches", type=int, help="stop after this many batches")
    c.add_argument("-o", "--output", type=Path, required=True, help="the event log to write (.jsonl)")
    c.set_defaults(func=_record)


def _check_jsonl(path: Path | None) -> None:
    if path is not None and path.suffix != ".jsonl":
        raise ConfigError([ConfigIssue("--output", str(path), "an event log or answer file ends in .jsonl")])


def _replay(args: argparse.Namespace) -> int:
    from litehit.attribution.event_log import read_event_log
    from litehit.attribution.log_replay import LogReplay
    from litehit.publish import AtomicPublisher

    _check_jsonl(args.output)
    try:
        replay = LogReplay(
            window_s=args.window_s,
            bucket_s=args.bucket_s,
            max_lag_s=args.max_lag_s,
            filter_bits=args.filter_bits,
            reorder_grace_s=args.reorder_grace_s,
        )
    except ValueError as exc:  # "<field> must ..., got <value>"
        field, _, reason = str(exc).partition(" ")
        flag = "--" + field.replace("_", "-")
        raise ConfigError([ConfigIssue(flag, getattr(args, field, None), reason.rsplit(", got ", 1)[0])]) from None
    counts: dict[str, Counter[str]] = {}
    try:
        items = read_event_log(Path(args.source), args.source)
        if args.output is None:
            for answer in replay.run(items):
                counts.setdefault(answer.worker, Counter())[answer.attribution.outcome.value] += 1
        else:
            with AtomicPublisher(args.output) as out:
                for answer in replay.run(items):
                    counts.setdefault(answer.worker, Counter())[answer.attribution.outcome.value] += 1
                    out.write(json.dumps(answer.as_dict(), separators=(",", ":")).encode() + b"\n")
                out.commit()
        stats = replay.store.stats()
    finally:
        replay.close()
    summary = _summary(counts, stats)
    if args.format == "json":
        print(json.dumps(summary, indent=2))
    else:
        _print_table(summary)
    return 0


def _summary(counts: dict[str, Counter[str]], stats: dict[str, dict[str, Any]]) -> dict[str, Any]:
    workers = []
    for worker in sorted(set(counts) | set(stats)):
        c = counts.get(worker, Counter())
        s = stats.get(worker, {}).get("counts", {})
        workers.append(
            {
                "worker": worker,
                "lookups": sum(c.values()),
                "outcomes": {o: c.get(o, 0) for o in _OUTCOMES},
                "batches": s.get("batches", 0),
                "gaps": s.get("gaps", 0),
                "restarts": s.get("restarts", 0),
                "duplicate_batches": s.get("duplicate_batches", 0),
            }
        )
    total = Counter[str]()
    for c in counts.values():
        total.update(c)
    return {"workers": workers, "outcomes": {o: total.get(o, 0) for o in _OUTCOMES}, "lookups": sum(total.values())}


def _print_table(summary: dict[str, Any]) -> None:
    header = ["worker", "lookups", *_OUTCOMES, "batches", "gaps", "restarts"]
    rows = [
        [w["worker"], w["lookups"], *(w["outcomes"][o] for o in _OUTCOMES), w["batches"], w["gaps"], w["restarts"]]
        for w in summary["workers"]
    ]
    rows.append(["total", summary["lookups"], *(summary["outcomes"][o] for o in _OUTCOMES), "", "", ""])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    for row in [header, *rows]:
        print(
            "  ".join(
                str(x).rjust(w) if i else str(x).ljust(w) for i, (x, w) in enumerate(zip(row, widths, strict=True))
            )
        )


def _record(args: argparse.Namespace) -> int:
    from litehit.attribution.event_log import batch_line
    from litehit.attribution.events import EventBatch
    from litehit.attribution.subscriber import KVEventSubscriber, parse_endpoints
    from litehit.publish import AtomicPublisher

    _check_jsonl(args.output)
    try:
        endpoints = parse_endpoints(args.zmq)
    except ValueError as exc:
        raise ConfigError([ConfigIssue("--zmq", args.zmq, str(exc))]) from None
    if not endpoints:
        raise ConfigError([ConfigIssue("--zmq", args.zmq, "names no worker")])
    if args.batches is not None and args.batches < 1:
        raise ConfigError([ConfigIssue("--batches", args.batches, "must be >= 1")])
    done = threading.Event()
    lock = threading.Lock()
    written = 0
    with AtomicPublisher(args.output) as out:

        def deliver(worker: str, batch: EventBatch) -> None:
            nonlocal written
            with lock:
                if done.is_set():
                    return
                out.write(batch_line(worker, batch))
                written += 1
                if args.batches is not None and written >= args.batches:
                    done.set()

        subscribers = [
            KVEventSubscriber(e.worker, e.endpoint, deliver, replay_endpoint=e.replay_endpoint, topic=e.topic)
            for e in endpoints
        ]
        previous = signal.signal(signal.SIGINT, lambda *_: done.set())
        try:
            for s in subscribers:
                s.start()
            print(f"recording {len(subscribers)} worker(s) to {args.output}; Ctrl-C stops", file=sys.stderr)
            deadline = None if args.seconds is None else time.monotonic() + args.seconds
            while not done.wait(0.1):
                if deadline is not None and time.monotonic() >= deadline:
                    break
        finally:
            done.set()
            for s in subscribers:
                s.stop()
            signal.signal(signal.SIGINT, previous)
        with lock:
            out.commit()
    print(f"recorded {written} batch(es) to {args.output}", file=sys.stderr)
    return 0
