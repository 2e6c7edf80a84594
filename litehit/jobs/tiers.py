"""The tier split: a replay's facts (or a facts file) split across cache tiers, exactly, with the
prefill estimate when a model and a GPU are given, per request category when the trace is known.
One stage: ``tiers.json`` (the bytes of ``litehit tiers -o``) and ``tiers.png`` in the job's
``tiers/`` folder, one SQL row per lane x category x tier.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from litehit.jobs.base import Artifact, SummaryTable, links_of
from litehit.jobs.facts_kind import DocumentKind, FactsSource, StoredFacts
from litehit.jobs.kinds import Kind
from litehit.kv_models import assumed_kv_note
from litehit.tiers.options import TiersOptions

if TYPE_CHECKING:
    from litehit.db.models import Base, Job
    from litehit.spec import ReplaySpec
    from litehit.storage import Storage

__all__ = ["KIND", "TiersCreate", "TiersJobSpec", "TiersKind", "facts_notes", "replay_runtime", "tiers_of"]

RESULT_FILE = "tiers.json"
REPORT_FILE = "report.html"
PLOT_FILE = "tiers.png"


class TiersCreate(TiersOptions, FactsSource):
    """A tier split of a replay's facts (or of a facts file in the storage root)."""

    model_config = ConfigDict(extra="forbid")


class TiersJobSpec(TiersOptions, StoredFacts):
    """A tier split as stored: its options and its facts (null: its replay's, Job.parent_id)."""


class TierRowPublic(BaseModel):
    name: str = Field(description="the tier")
    capacity_blocks: int | None = Field(description="its capacity in the lane's blocks (null: infinite or mixed)")
    hit_blocks: int = Field(description="blocks it served")
    hit_tokens: int = Field(description="their tokens (blocks x block size)")
    hit_rate: float = Field(description="hit_tokens / input tokens")
    cumulative_hit_rate: float = Field(description="served by this tier and the ones above it")
    bytes_loaded: int = Field(description="bytes read from it into the GPU (0 for the first tier)")


class CategoryPublic(BaseModel):
    requests: int = Field(description="requests of the category")
    input_tokens: int = Field(description="their input tokens")
    hit_rate: float = Field(description="served by any tier")
    tiers: list[TierRowPublic] = Field(description="what each tier served of them")


class LaneTiersPublic(BaseModel):
    lane: str = Field(description="the lane's instance_id")
    requests: int = Field(description="requests of the lane")
    input_tokens: int = Field(description="their input tokens")
    hit_rate: float = Field(description="served by any tier")
    tiers: list[TierRowPublic] = Field(description="what each tier served, first = HBM")
    prefill_s: dict[str, float | None] | None = Field(
        description="the prefill estimate's statistics (null without a model and GPU)"
    )
    categories: dict[str, CategoryPublic] = Field(description="per request category (empty: the trace is unknown)")


def replay_runtime(replay: Job | None, storage: Storage | None) -> ReplaySpec | None:
    """The config a replay job ran, its trace resolved in the storage root (None: no replay)."""
    if replay is None or storage is None:
        return None
    from litehit.jobs.replay import ReplayJobSpec

    spec = ReplayJobSpec.model_validate(replay.spec)  # a replay stores its config flat
    return spec.replay_spec(str(storage.absolute(spec.config["trace_file_path"])), str(storage.out_dir(replay.id)))


def tiers_of(facts: Path, options: TiersOptions, runtime: ReplaySpec | None, notes: list[str]) -> dict[str, Any]:
    """tiers.json of a facts file; with the replay config that produced it (runtime), per request
    category too (its trace is read again)."""
    from litehit.tiers.categories import trace_categories
    from litehit.tiers.document import tiers_document
    from litehit.tiers.lanes import load_lanes

    lanes = load_lanes(facts, byte_steps=True)  # a hybrid lane's tiers are total bytes
    categories, hashed = None, False
    if runtime is not None:
        categories, why, hashed = trace_categories(runtime, lanes)
        if why:
            notes = [*notes, f"no request categories: {why}"]
    return tiers_document(lanes, options, categories=categories, notes=notes, prefix_contract=hashed)


def facts_notes(replay: Job | None) -> list[str]:
    note = assumed_kv_note(replay.spec) if replay is not None else None
    return [note] if note else []


class TiersKind(DocumentKind[TiersJobSpec]):
    kind = Kind.TIERS
    what = "tier split"
    route = "/tiers"
    tasks = "tiers"
    spec_model = TiersJobSpec
    public_name = "TiersPublic"
    summary_table = SummaryTable("TierRow")
    create_model = TiersCreate
    submit_summary = "Queue a tier split (HBM / DRAM / SSD ...) of a replay's facts (or a facts file)"
    result_file = RESULT_FILE
    plot_file = PLOT_FILE
    artifacts: ClassVar[tuple[Artifact, ...]] = (
        Artifact(
            path="result",
            file=f"tiers/{RESULT_FILE}",
            media_type="application/json",
            summary="tiers.json (the bytes of `litehit tiers -o`)",
            link="result",
        ),
        Artifact(
            path="plot.png",
            file=f"tiers/{PLOT_FILE}",
            media_type="image/png",
            summary="Per-tier hit rates (PNG)",
            link="plot",
        ),
        Artifact(
            path="report.html",
            file=f"tiers/{REPORT_FILE}",
            media_type="text/html; charset=utf-8",
            summary="The `litehit report --tier` page: curves, table, misses and the cache tiers",
            link="report",
            ready="its report exists",
        ),
    )

    def compute(
        self, facts: Path, spec: Any, *, replay: Job | None = None, storage: Storage | None = None
    ) -> dict[str, Any]:
        options = TiersOptions.model_validate(spec.model_dump(exclude={"facts_path"}))
        return tiers_of(facts, options, replay_runtime(replay, storage), facts_notes(replay))

    def publish_more(self, document: dict[str, Any], facts: Path, out: Path, job: Job, replay: Job | None) -> None:
        from datetime import UTC, datetime

        from litehit.publish import publish_bytes
        from litehit.report import build_report, describe_facts_file, package_version

        page = build_report(
            facts,
            facts_file=describe_facts_file(facts, facts.name),
            version=package_version(),
            generated_at=datetime.now(UTC),
            tiers=document,
            context={"tiers job": job.id, **({"replay job": replay.id} if replay is not None else {})},
        )
        publish_bytes(out / REPORT_FILE, page.encode())

    def plot(self, document: dict[str, Any], path: Path) -> Path:
        from litehit.tiers.plots import plot_tiers

        return plot_tiers(document, path)

    def stats_of(self, document: dict[str, Any]) -> dict[str, Any]:
        return {
            "lanes": len(document["lanes"]),
            "prefill_s": {lane["lane"]: lane["prefill_s"] for lane in document["lanes"] if "prefill_s" in lane},
            "constants": document["constants"],
            "notes": document["notes"],
        }

    def summary_rows(self, job_id: str, value: Any, spec: Any) -> list[Base]:
        from litehit.db.models import TierRow

        rows: list[Base] = []
        for lane in value["lanes"]:
            groups = [("", lane), *lane["categories"].items()]
            for category, entry in groups:
                for i, tier in enumerate(entry["tiers"]):
                    rows.append(
                        TierRow(
                            job_id=job_id,
                            lane=lane["lane"],
                            category=category,
                            tier=i,
                            name=tier["name"],
                            capacity_blocks=tier["capacity_blocks"],
                            requests=entry["requests"],
                            input_tokens=entry["input_tokens"],
                            hit_blocks=tier["hit_blocks"],
                            hit_tokens=tier["hit_tokens"],
                            hit_rate=tier["hit_rate"],
                            cumulative_hit_rate=tier["cumulative_hit_rate"],
                            bytes_loaded=tier["bytes_loaded"],
                        )
                    )
        return rows

    def summary_order(self) -> tuple[str, ...]:
        return ("lane", "category", "tier")

    def public_fields(self) -> dict[str, Any]:
        return {
            "replay_id": (str | None, Field(description="the replay whose facts are split (null: a facts_path)")),
            "lanes": (
                list[LaneTiersPublic],
                Field(description="one per lane, once succeeded (lanes are never summed)"),
            ),
            "constants": (dict[str, Any], Field(description="every constant of the prefill model, once succeeded")),
            "notes": (list[str], Field(description="what the numbers rest on")),
            "links": (dict[str, str], Field(description="URLs of tiers.json and the plot, once succeeded")),
        }

    def view(self, job: dict[str, Any], parts: list[dict[str, Any]], summaries: list[dict[str, Any]]) -> dict[str, Any]:
        stats = job.get("stats") or {}
        lanes: dict[str, dict[str, Any]] = {}
        fields = TierRowPublic.model_fields
        for row in summaries:
            lane = lanes.setdefault(
                row["lane"],
                {
                    "lane": row["lane"],
                    "tiers": [],
                    "categories": {},
                    "prefill_s": (stats.get("prefill_s") or {}).get(row["lane"]),
                },
            )
            entry = lane if row["category"] == "" else lane["categories"].setdefault(row["category"], {"tiers": []})
            entry["requests"], entry["input_tokens"] = row["requests"], row["input_tokens"]
            entry["tiers"].append({name: row[name] for name in fields})
        for entry in [*lanes.values(), *(c for lane in lanes.values() for c in lane["categories"].values())]:
            tokens = sum(t["hit_tokens"] for t in entry["tiers"])
            entry["hit_rate"] = tokens / entry["input_tokens"] if entry["input_tokens"] else 0.0
        return {
            **job,
            "replay_id": job["parent_id"],
            "lanes": list(lanes.values()),
            "constants": stats.get("constants") or {},
            "notes": stats.get("notes") or [],
            "links": links_of(self, job),
        }


KIND = TiersKind()
