"""The tier planner: the cheapest tier configuration reaching a target and the frontier of cost
against hit rate (litehit.tiers.planner), over a replay's facts or a facts file. One stage:
``plan.json`` (the bytes of ``litehit plan -o``) and ``plan.png`` in the job's ``plan/`` folder,
one SQL row per configuration of each lane (rank 0 the best, then the frontier by cost).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from litehit.jobs.base import Artifact, SummaryTable, links_of
from litehit.jobs.facts_kind import DocumentKind, FactsSource, StoredFacts
from litehit.jobs.kinds import Kind
from litehit.tiers.options import PlanOptions

if TYPE_CHECKING:
    from litehit.db.models import Base, Job
    from litehit.storage import Storage

__all__ = ["KIND", "PlanCreate", "PlanJobSpec", "PlanKind"]

RESULT_FILE = "plan.json"
PLOT_FILE = "plan.png"
VALUE_KEYS = ("gpu_hours_saved_per_hour", "value_per_hour", "net_per_hour")


class PlanCreate(PlanOptions, FactsSource):
    """A tier plan over a replay's facts (or a facts file in the storage root)."""

    model_config = ConfigDict(extra="forbid")


class PlanJobSpec(PlanOptions, StoredFacts):
    """A plan as stored: its options and its facts (null: its replay's, Job.parent_id)."""


class PlanTierPublic(BaseModel):
    name: str = Field(description="the tier")
    capacity_blocks: int | None = Field(description="in the lane's blocks (null: a hybrid lane's, in bytes)")
    capacity: str = Field(description="its bytes, for people")
    capacity_bytes: int = Field(description="capacity_blocks x the lane's block bytes (a hybrid lane: its bytes)")


class ConfigurationPublic(BaseModel):
    tiers: list[PlanTierPublic] = Field(description="each tier's capacity, first = HBM")
    total_capacity_blocks: int | None = Field(description="the tiers' blocks together (null: a hybrid lane)")
    cost_per_hour: float = Field(description="sum of capacity GiB x price per GiB-hour")
    hit_rate: float = Field(description="hit tokens / input tokens, served by any tier")
    prefill_s: dict[str, float | None] | None = Field(description="the prefill estimate (null without a model)")
    gpu_hours_saved_per_hour: float | None = Field(default=None, description="with gpu_price_per_hour")
    value_per_hour: float | None = Field(default=None, description="GPU-hours saved x gpu_price_per_hour")
    net_per_hour: float | None = Field(default=None, description="value_per_hour - cost_per_hour")


class LanePlanPublic(BaseModel):
    lane: str = Field(description="the lane's instance_id")
    best: ConfigurationPublic | None = Field(description="the cheapest meeting the target (null: none does)")
    frontier: list[ConfigurationPublic] = Field(description="not dominated on cost, hit rate, mean estimate")
    searched: str = Field(description="what was evaluated, exactly")


def _configuration(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: row[k] for k in ("tiers", "total_capacity_blocks", "cost_per_hour", "hit_rate", "prefill_s")}
    return {**out, **(row["value"] or {})}


class PlanKind(DocumentKind[PlanJobSpec]):
    kind = Kind.PLAN
    what = "tier plan"
    route = "/plans"
    tasks = "plan"
    spec_model = PlanJobSpec
    public_name = "PlanPublic"
    summary_table = SummaryTable("PlanRow")
    create_model = PlanCreate
    submit_summary = "Queue a tier plan: the cheapest tiers reaching a target, and the cost frontier"
    result_file = RESULT_FILE
    plot_file = PLOT_FILE
    artifacts: ClassVar[tuple[Artifact, ...]] = (
        Artifact(
            path="result",
            file=f"plan/{RESULT_FILE}",
            media_type="application/json",
            summary="plan.json (the bytes of `litehit plan -o`)",
            link="result",
        ),
        Artifact(
            path="plot.png", file=f"plan/{PLOT_FILE}", media_type="image/png", summary="The frontier (PNG)", link="plot"
        ),
    )

    def compute(
        self, facts: Path, spec: Any, *, replay: Job | None = None, storage: Storage | None = None
    ) -> dict[str, Any]:
        from litehit.tiers.lanes import load_lanes
        from litehit.tiers.planner import plan_document

        options = PlanOptions.model_validate(spec.model_dump(exclude={"facts_path"}))
        return plan_document(load_lanes(facts, byte_steps=True), options)

    def plot(self, document: dict[str, Any], path: Path) -> Path:
        from litehit.tiers.plots import plot_plan

        return plot_plan(document, path)

    @staticmethod
    def lane_plans(document: dict[str, Any]) -> list[dict[str, Any]]:
        return list(document.get("lanes", [document]))

    def stats_of(self, document: dict[str, Any]) -> dict[str, Any]:
        return {
            "mode": document["mode"],
            "target": document["target"],
            "constants": document["constants"],
            "searched": {p["lane"]: p["searched"] for p in self.lane_plans(document)},
            "unreachable": {p["lane"]: p["unreachable"] for p in self.lane_plans(document) if "unreachable" in p},
        }

    def summary_rows(self, job_id: str, value: Any, spec: Any) -> list[Base]:
        from litehit.db.models import PlanRow

        rows: list[Base] = []
        for plan in self.lane_plans(value):
            ranked = ([(0, plan["best"])] if plan["best"] is not None else []) + list(enumerate(plan["frontier"], 1))
            for rank, c in ranked:
                rows.append(
                    PlanRow(
                        job_id=job_id,
                        lane=plan["lane"],
                        rank=rank,
                        tiers=c["tiers"],
                        total_capacity_blocks=c["total_capacity_blocks"],
                        cost_per_hour=c["cost_per_hour"],
                        hit_rate=c["hit_rate"],
                        prefill_s=c["prefill_s"],
                        value={k: c[k] for k in VALUE_KEYS if k in c} or None,
                    )
                )
        return rows

    def summary_order(self) -> tuple[str, ...]:
        return ("lane", "rank")

    def public_fields(self) -> dict[str, Any]:
        return {
            "replay_id": (str | None, Field(description="the replay whose facts are planned (null: a facts_path)")),
            "lanes": (list[LanePlanPublic], Field(description="one plan per lane, once succeeded")),
            "constants": (dict[str, Any], Field(description="every constant of the prefill model, once succeeded")),
            "unreachable": (dict[str, str], Field(description="lanes where no configuration meets the target")),
            "links": (dict[str, str], Field(description="URLs of plan.json and the plot, once succeeded")),
        }

    def view(self, job: dict[str, Any], parts: list[dict[str, Any]], summaries: list[dict[str, Any]]) -> dict[str, Any]:
        stats = job.get("stats") or {}
        lanes: dict[str, dict[str, Any]] = {}
        for row in summaries:
            lane = lanes.setdefault(
                row["lane"],
                {
                    "lane": row["lane"],
                    "best": None,
                    "frontier": [],
                    "searched": (stats.get("searched") or {}).get(row["lane"], ""),
                },
            )
            if row["rank"] == 0:
                lane["best"] = _configuration(row)
            else:
                lane["frontier"].append(_configuration(row))
        return {
            **job,
            "replay_id": job["parent_id"],
            "lanes": list(lanes.values()),
            "constants": stats.get("constants") or {},
            "unreachable": stats.get("unreachable") or {},
            "links": links_of(self, job),
        }


KIND = PlanKind()
