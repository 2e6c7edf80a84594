"""A kind's parts and merge over a job's work folder (litehit.replay.staged), for the service: each
part runs in its own task, anywhere, from its lane's parsed requests; the merge reads what the
parts left. The functions are the same ``open_part`` and ``merger`` the CLI runs in process
(litehit.jobs.local); only where the chunks come from differs.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from litehit.errors import ReplayCancelled, ReplayError
from litehit.jobs.base import Merged, PartOutput, PartPlan, TraceCounts, TraceKind, raise_in_order
from litehit.replay.staged import (
    atomic_files,
    iter_lane_work,
    iter_stored_chunks,
    part_arrays,
    part_output,
    read_manifest,
    stored_plan,
    write_arrays,
)
from litehit.spec import ReplaySpec

__all__ = ["merge_stored", "run_stored_part", "run_stored_unit"]


def run_stored_part(
    kind: TraceKind[Any],
    spec: Any,
    runtime: ReplaySpec,
    workdir: Path,
    index: int,
    part: PartPlan,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> PartOutput:
    """Runs part `index` over its lane's parsed requests in order; writes what it emits per chunk
    (part-<index>.out) and its arrays (part-<index>-<name>.npy) into the work folder, each by
    tmp-then-rename. on_progress(requests, blocks) after every chunk."""
    (output,) = run_stored_unit(
        kind, spec, runtime, workdir, [index], [part], on_progress=on_progress, should_stop=should_stop
    )
    return output


def run_stored_unit(
    kind: TraceKind[Any],
    spec: Any,
    runtime: ReplaySpec,
    workdir: Path,
    indices: Sequence[int],
    parts: Sequence[PartPlan],
    *,
    on_progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> list[PartOutput]:
    """run_stored_part for parts of one unit (kind.open_unit: parts whose lanes read the same
    requests, fed each chunk one after the other), in one pass over their lanes' one file: each
    part's outputs as run_stored_part writes them. on_progress(requests, blocks) of that lane."""
    manifest = read_manifest(workdir)
    plan = stored_plan(runtime, manifest)
    lane = parts[0].lane
    if any(plan.inputs[part.lane] != plan.inputs[lane] for part in parts):
        raise ReplayError(f"lanes {[part.instance_id for part in parts]} do not read the same requests")
    runs = kind.open_unit(spec, plan, parts)
    requests = blocks = 0
    try:
        with contextlib.ExitStack() as stack:
            sinks: list[Any] = []
            for index, part in zip(indices, parts, strict=True):
                sink = None
                if kind.chunk_arrays_of(part):
                    (sink,) = stack.enter_context(atomic_files([part_output(workdir, index)]))
                sinks.append(sink)
            for work in iter_lane_work(workdir, manifest, lane):
                if should_stop is not None and should_stop():
                    raise ReplayCancelled(kind.cancelled)
                for run, sink in zip(runs, sinks, strict=True):
                    emitted = run.feed(work)
                    if sink is not None and emitted is not None:
                        write_arrays(sink, *emitted)
                requests += work.requests
                blocks += len(work.keys)
                if on_progress is not None:
                    on_progress(requests, blocks)
        outputs = [run.output(plan.categories.names) for run in runs]
    except (OSError, ValueError) as exc:
        raise ReplayError(f"lane {parts[0].instance_id}: stage files unreadable: {exc}") from None
    finally:
        for run in runs:
            run.close()
    for index, output in zip(indices, outputs, strict=True):
        for name, array in output.arrays.items():
            with atomic_files([part_arrays(workdir, index, name)]) as (f,):
                np.lib.format.write_array(f, np.ascontiguousarray(array), allow_pickle=False)
    return outputs


def _stored_arrays(workdir: Path, index: int, names: Sequence[str]) -> dict[str, Any]:
    out = {}
    for name in names:
        with part_arrays(workdir, index, name).open("rb") as f:
            out[name] = np.lib.format.read_array(f, allow_pickle=False)
    return out


def merge_stored(
    kind: TraceKind[Any],
    spec: Any,
    runtime: ReplaySpec,
    workdir: Path,
    parts: Sequence[PartPlan],
    results: Sequence[dict[str, Any]],
) -> Merged:
    """The merge of a job whose parts all succeeded: `results` are their stored results, in part
    order; their arrays (the kind's ``part_arrays``) are read from the work folder."""
    start = time.perf_counter()
    manifest = read_manifest(workdir)
    plan = stored_plan(runtime, manifest)
    model = kind.result_model()
    try:
        outputs = [
            PartOutput(model.model_validate(result), _stored_arrays(workdir, i, kind.part_arrays))
            for i, result in enumerate(results)
        ]
    except (OSError, ValueError) as exc:
        raise ReplayError(f"stage files in {workdir} are missing or unreadable: {exc}") from None
    merger = kind.merger(spec, runtime, plan, parts)
    try:
        if kind.chunk_arrays:
            emitting = [kind.chunk_arrays_of(part) for part in parts]
            for chunk, emitted in iter_stored_chunks(workdir, plan, manifest, emitting):
                merger.add_chunk(chunk, emitted)
        counts = TraceCounts(
            manifest.trace_format,
            manifest.lines,
            manifest.rows,
            manifest.reads,
            manifest.blocks,
            manifest.parse_s + time.perf_counter() - start,
        )
        return merger.finish(outputs, counts)
    except BaseException as exc:  # (a facts file that could not be written fails the merge)
        raise_in_order(exc, [merger])
    finally:
        merger.close()
