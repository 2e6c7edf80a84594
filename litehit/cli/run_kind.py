"""Running a job kind from the command line: its parts in process over one pass of the trace and
its merge (litehit.jobs.local, the same functions the service runs), with a progress line, the
result document published where ``-o`` says, and the run recorded (litehit.jobs.records)."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from litehit.cli.stdin_input import named_stdin

if TYPE_CHECKING:
    from collections.abc import Callable

    from pydantic import BaseModel

    from litehit.jobs.base import TraceKind
    from litehit.jobs.local import LocalRun
    from litehit.spec import ReplaySpec

__all__ = ["run_kind"]


def run_kind(
    kind: TraceKind[Any],
    runtime: ReplaySpec,
    options: BaseModel | None,
    args: argparse.Namespace,
    *,
    label: str,
    document: Callable[[Any], bytes] | None = None,
    output: Path | None = None,
) -> tuple[LocalRun, str | None]:
    """Runs `kind` over the command line's trace (progress lines named `label`); with `output`,
    publishes ``document(value)`` there atomically. Returns the run and the id of its record
    (None when not recorded)."""
    from litehit.cli.progress import ProgressReporter
    from litehit.jobs.local import run_local
    from litehit.jobs.records import JobRecorder
    from litehit.publish import publish_bytes

    spec = kind.spec_of(runtime.model_dump(mode="json"), options)
    with JobRecorder(
        kind.kind,
        spec.model_dump(mode="json"),
        rename=partial(named_stdin, args),
        detach=getattr(args, "detach_records", False),
    ) as record:
        reporter = ProgressReporter(label=label)
        try:
            run = run_local(kind, spec, runtime, on_progress=reporter)
        except BaseException:
            reporter.finish("stopped")
            raise
        reporter.finish("done")
        path = None
        if output is not None and document is not None:
            path = publish_bytes(output, document(run.merged.value))
        elif kind.chunk_arrays:  # the merge published the result itself (the facts)
            path = kind.publish(run.merged.value, Path(runtime.output_result_path))
        record.succeeded(run, str(path.resolve()) if path is not None else None)
    return run, record.job_id
