"""The capacity query: published facts projected at capacities (the projector is the only code
that turns a capacity into hits). One stage, in one task: the per-request JSONL, the exact curve,
the plot and the report page are published in the job's ``query/`` folder, and one summary row
per (instance, capacity slot) plus the totals (one per lane setup of the replay) go to SQL.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from litehit.capacity import DEFAULT_TARGETS
from litehit.db.states import Stage
from litehit.errors import ConfigError, ConfigIssue, QueryError
from litehit.jobs.base import Artifact, SummaryTable, links_of
from litehit.jobs.facts_kind import FactsKind, FactsSource
from litehit.jobs.kinds import Kind
from litehit.kv_models import KV_BYTES_ASSUMED, assumed_kv_note
from litehit.limits import CAPACITIES_MAX, TARGETS_MAX
from litehit.storage import CURVE_FILE, PLOT_FILE, REPORT_FILE, REQUESTS_FILE, Storage

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from litehit.db.models import Base, Job, QuerySummary
    from litehit.query import QueryResult
    from litehit.setups import SetupTotal

__all__ = ["KIND", "QueryCreate", "QueryJobSpec", "QueryKind", "SummaryPublic"]


class QueryCreate(FactsSource):
    """A capacity query over a replay's facts, or over a facts file in the storage root."""

    model_config = ConfigDict(extra="forbid")

    capacity_gb: list[float | str] = Field(
        min_length=1,
        max_length=CAPACITIES_MAX,
        description="binary GiB (negative or inf = infinite), or a string with a unit: 512MiB, 1.5TiB, "
        "20000blocks, 1Mtokens",
    )
    targets: list[float] | None = Field(
        default=None, max_length=TARGETS_MAX, description="fractions of the infinite hit rate"
    )


class QueryJobSpec(BaseModel):
    """A query as stored: its capacities as recorded, its target fractions and its facts (a path
    relative to the storage root, or null: the facts of its replay, Job.parent_id)."""

    capacity_gb: list[float | str] = Field(description="each capacity as recorded (GiB, or 536870912B, 20000blocks)")
    targets: list[float] = Field(description="fractions of the infinite-capacity hit rate")
    facts_path: str | None = Field(default=None, description="a facts file (null: the replay's facts)")
    kv_bytes_assumed: bool = Field(default=False, description="its replay assumed the default KV bytes")

    @model_serializer
    def _stored(self) -> dict[str, Any]:
        data: dict[str, Any] = {"capacity_gb": self.capacity_gb, "targets": self.targets, "facts_path": self.facts_path}
        if self.kv_bytes_assumed:
            data[KV_BYTES_ASSUMED] = True  # its replay's note carries over to the query's outputs
        return data


class SummaryPublic(BaseModel):
    instance_id: str | None = Field(description="the instance (null: all instances together)")
    requests: int = Field(description="requests queried")
    total_input_tokens: int = Field(description="their input tokens")
    capacity_gb: list[float | None] = Field(description="GiB of each capacity (null: given in blocks or tokens)")
    capacities: list[str] = Field(description='each capacity as recorded: "2.0" (GiB), "536870912B", "20000blocks"')
    total_hit_blocks: list[int] = Field(description="hit blocks at each capacity")
    total_hit_tokens: list[int] = Field(description="hit tokens at each capacity")
    hit_rates: list[float] = Field(description="total_hit_tokens / total_input_tokens at each capacity")


class SetupTotalPublic(SummaryPublic):
    """The total over the lanes of one setup (same block size, block bytes and TTL)."""

    block_size: int = Field(description="tokens per block of these lanes")
    block_bytes: int = Field(description="KV bytes of one block of these lanes")
    ttl_seconds: int = Field(description="their TTL (0: none)")
    instances: list[str] = Field(description="the lanes summed")


def parse_slots(capacity_gb: list[float | str]) -> Any:
    from litehit.capacity import parse_capacities

    return parse_capacities([str(c) for c in capacity_gb])


def summary_rows(job_id: str, result: QueryResult, totals: list[SetupTotal]) -> list[QuerySummary]:
    """One row per (instance, slot) and per slot of each total. totals: the result's totals per
    setup (more than one: they replace the total across setups)."""
    from litehit.db.models import QuerySummary
    from litehit.query import Summary

    def rows(summary: Summary, is_total: bool, name: str = "") -> list[QuerySummary]:
        if summary.instance_id is not None:
            name = summary.instance_id.decode("utf-8", "replace")
        return [
            QuerySummary(
                job_id=job_id,
                is_total=is_total,
                instance_id=name,
                slot=i,
                capacity_gb=slot.capacity_gb,
                capacity=str(slot.recorded_gb),
                requests=summary.requests,
                total_input_tokens=summary.total_input_tokens,
                total_hit_blocks=summary.total_hit_blocks[i],
                total_hit_tokens=summary.total_hit_tokens[i],
                hit_rate=summary.hit_rates[i],
            )
            for i, slot in enumerate(result.slots)
        ]

    out = [row for summary in result.instances for row in rows(summary, False)]
    if len(totals) > 1:
        out += [row for total in totals for row in rows(total.summary, True, total.setup.key)]
    else:
        out += rows(result.total, True)
    return out


def _setup_stats(totals: list[SetupTotal]) -> list[dict[str, Any]]:
    """What the API shows of each total: its key in the summary rows ("" for a single setup), the
    setup and its lanes."""
    return [
        {"key": t.setup.key if len(totals) > 1 else "", **t.setup.as_dict(), "instances": t.instances} for t in totals
    ]


def _targets(curves: list[Any]) -> dict[str, Any]:
    return {
        c.instance_id: {
            "infinite_hit_rate": c.plateau.hit_rate,
            "capacity_gib_for": {str(f): c.point(i).capacity_gib for f, i in sorted(c.targets.items())},
        }
        for c in curves
    }


class QueryKind(FactsKind[QueryJobSpec]):
    kind = Kind.QUERY
    what = "query"
    route = "/queries"
    tasks = "query"
    spec_model = QueryJobSpec
    public_name = "QueryPublic"
    first_stage = Stage.QUERY
    summary_table = SummaryTable("QuerySummary")
    create_model = QueryCreate
    submit_summary = "Queue a capacity query over a replay's facts (or a facts file in the storage root)"
    artifacts: ClassVar[tuple[Artifact, ...]] = (
        Artifact(
            path="requests",
            file=f"query/{REQUESTS_FILE}",
            media_type="application/x-ndjson",
            summary="Per-request JSONL (the original facts query output), streamed",
            link="requests",
        ),
        Artifact(
            path="curve",
            file=f"query/{CURVE_FILE}",
            media_type="application/json",
            summary="The exact hit-rate curve of every instance",
            link="curve",
        ),
        Artifact(
            path="plot.png",
            file=f"query/{PLOT_FILE}",
            media_type="image/png",
            summary="Hit rate vs capacity (PNG)",
            link="plot",
        ),
        Artifact(
            path="report.html",
            file=f"query/{REPORT_FILE}",
            media_type="text/html; charset=utf-8",
            summary="One self-contained HTML page: curves, table, targets, miss attribution, provenance",
            link="report",
            ready="its report exists",
        ),
    )

    # --- submission ---

    def request_body(self, body: BaseModel) -> dict[str, Any]:
        """The fields the idempotency digest has always covered (stored digests stay valid)."""
        assert isinstance(body, QueryCreate)
        return {
            "replay_id": body.replay_id,
            "facts_path": body.facts_path,
            "capacity_gb": body.capacity_gb,
            "targets": body.targets,
        }

    def checked(self, session: Session, storage: Storage, body: QueryCreate) -> tuple[QueryJobSpec, str | None]:
        """The stored spec and the replay it reads (ConfigError naming the field otherwise)."""
        try:
            slots = parse_slots(body.capacity_gb)
        except QueryError as exc:
            raise ConfigError([ConfigIssue("capacity_gb", body.capacity_gb, str(exc))]) from None
        for i, t in enumerate(body.targets or []):
            if not 0 < t <= 1:
                raise ConfigError([ConfigIssue(f"targets[{i}]", t, "target fractions must be in (0, 1]")])
        relative, parent = self.source(session, storage, body)
        spec = QueryJobSpec(
            capacity_gb=[s.recorded_gb for s in slots],
            targets=body.targets or list(DEFAULT_TARGETS),
            facts_path=relative,
            kv_bytes_assumed=parent is not None and assumed_kv_note(parent.spec) is not None,
        )
        return spec, parent.id if parent is not None else None

    # --- the work ---

    def run(self, session: Session, storage: Storage, job: Job) -> tuple[dict[str, Any], str, list[Base]]:
        """Runs a queued query: its files published in the job's query folder; returns the job's
        stats, its output path and its summary rows."""
        from litehit.curve import exact_curves
        from litehit.db.models import Job
        from litehit.plots import plot_facts
        from litehit.publish import AtomicPublisher, publish_bytes
        from litehit.query import query_facts
        from litehit.setups import replay_setups, setup_totals

        spec = QueryJobSpec.model_validate(job.spec)
        facts = self.facts_of(session, storage, job)
        out = storage.query_dir(job.id)
        out.mkdir(parents=True, exist_ok=True)
        slots = parse_slots(spec.capacity_gb)
        with AtomicPublisher(out / REQUESTS_FILE) as pub:
            result = query_facts(facts, slots, pub)
            pub.commit()
        curves = exact_curves(facts, spec.targets)
        publish_bytes(out / CURVE_FILE, json.dumps({"instances": [c.as_dict() for c in curves]}).encode())
        plot_facts(facts, out, capacities=[s for s in slots if not s.infinite], targets=spec.targets, formats=("png",))
        parent = session.get(Job, job.parent_id) if job.parent_id else None
        publish_bytes(out / REPORT_FILE, self._report(session, storage, job, parent, facts, spec).encode())
        setups = replay_setups(parent.spec) if parent is not None and isinstance(parent.spec, dict) else {}
        totals = setup_totals(result, setups)
        stats = {
            "rows": result.rows,
            "instances": len(result.instances),
            "targets": _targets(curves),
            "setups": _setup_stats(totals),
        }
        return stats, storage.relative(out), list(summary_rows(job.id, result, totals))

    def _report(
        self, session: Session, storage: Storage, job: Job, parent: Job | None, facts: Path, spec: QueryJobSpec
    ) -> str:
        """The `litehit report` page of the query: its facts, capacities and targets, with its
        replay's config and uploaded trace as provenance."""
        from litehit.report import build_report, describe_facts_file, package_version

        return build_report(
            facts,
            facts_file=describe_facts_file(facts, storage.relative(facts)),
            version=package_version(),
            generated_at=datetime.now(UTC),
            capacities=parse_slots(spec.capacity_gb),
            plateau_fractions=spec.targets,
            replay=_replay_record(session, parent) if parent is not None else None,
            context={"query job": job.id},
        )

    def cli_summary_rows(self, job_id: str, result: QueryResult) -> list[QuerySummary]:
        """The rows a CLI query records (a facts file alone: no setups, one total)."""
        return summary_rows(job_id, result, [])

    # --- the view ---

    def public_fields(self) -> dict[str, Any]:
        return {
            "replay_id": (str | None, Field(description="the replay whose facts are queried (null: a facts_path)")),
            "instances": (list[SummaryPublic], Field(description="one summary per instance")),
            "total": (
                SummaryPublic | None,
                Field(
                    description="all instances together, when they share one setup (block size, block bytes, TTL) "
                    "or their setups are unknown (a facts_path); null under mixed setups and until the query succeeded"
                ),
            ),
            "totals": (
                list[SetupTotalPublic],
                Field(
                    default_factory=list,
                    description="one total per setup of the replay's lanes (lanes of different setups share no "
                    "meaningful total); empty for a facts_path or until the query succeeded",
                ),
            ),
            "links": (
                dict[str, str],
                Field(description="URLs of the per-request JSONL, the curve, the plot and the report, once succeeded"),
            ),
        }

    def summary_order(self) -> tuple[str, ...]:
        return ("is_total", "instance_id", "slot")

    def view(self, job: dict[str, Any], parts: list[dict[str, Any]], summaries: list[dict[str, Any]]) -> dict[str, Any]:
        """The job with its summaries: per instance, the total over all instances when they share
        one setup (or their setups are unknown), and one total per setup (litehit.setups)."""
        instances: dict[str, dict[str, Any]] = {}
        totals: dict[str, dict[str, Any]] = {}  # setup key ("" for the one total) -> summary
        for row in summaries:
            group = totals if row["is_total"] else instances
            entry = group.get(row["instance_id"])
            if entry is None:
                entry = group[row["instance_id"]] = {
                    "instance_id": None if row["is_total"] else row["instance_id"],
                    "requests": row["requests"],
                    "total_input_tokens": row["total_input_tokens"],
                    "capacity_gb": [],
                    "capacities": [],
                    "total_hit_blocks": [],
                    "total_hit_tokens": [],
                    "hit_rates": [],
                }
            entry["capacity_gb"].append(row["capacity_gb"])
            entry["capacities"].append(row["capacity"])
            entry["total_hit_blocks"].append(row["total_hit_blocks"])
            entry["total_hit_tokens"].append(row["total_hit_tokens"])
            entry["hit_rates"].append(row["hit_rate"])
        setups = (job.get("stats") or {}).get("setups") or []
        per_setup = [
            {**totals[s["key"]], **{k: s[k] for k in ("block_size", "block_bytes", "ttl_seconds", "instances")}}
            for s in setups
            if s.get("key") in totals
        ]
        ordered = [instances[k] for k in sorted(instances, key=lambda s: s.encode())]
        return {
            **job,
            "replay_id": job["parent_id"],
            "instances": ordered,
            "total": totals.get(""),
            "totals": per_setup,
            "links": links_of(self, job),
        }


def _replay_record(session: Session, replay: Job) -> Any:
    from litehit.db.models import Trace
    from litehit.report import ReplayRecord

    trace_row = session.get(Trace, replay.trace_id) if replay.trace_id else None
    config = dict(replay.spec)
    trace: dict[str, Any] = {"path": config.get("trace_file_path", "")}
    if trace_row is not None:
        trace = {
            "id": trace_row.id,
            "name": trace_row.name,
            "format": trace_row.trace_format,
            "size": f"{trace_row.size_bytes:,} bytes",
            "compression": trace_row.compression,
            "sha256": trace_row.sha256,
        }
    stats = {k: v for k, v in (replay.stats or {}).items() if isinstance(v, int | float | str)}
    return ReplayRecord(replay.id, config, trace, stats, replay.finished_at)


KIND = QueryKind()
