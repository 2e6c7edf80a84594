"""The workload profile: every lane replayed at infinite capacity with its TTL (the exact lane core)
with a recorder beside it, one part per lane; the merge puts the lanes' profiles into
``profile.json`` and one summary row per lane and per lane x request category into SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, Field

from litehit.db.states import Stage
from litehit.jobs.base import Artifact, Merged, PartOutput, PartPlan, SummaryTable, TraceCounts, TraceJobSpec, TraceKind
from litehit.jobs.kinds import Kind
from litehit.profile.result import PLOT_NAMES, LaneProfile, Metrics, ProfileResult
from litehit.storage import PROFILE_PLOT_DIR, PROFILE_RESULT_FILE

if TYPE_CHECKING:
    from litehit.db.models import ProfileRow
    from litehit.profile.runs import ProfileRun
    from litehit.replay.plan import LaneWork, ReplayPlan
    from litehit.spec import ReplaySpec

__all__ = ["KIND", "PROFILE_ROW_FIELDS", "ProfileJobSpec", "ProfileKind", "profile_rows"]


class ProfileJobSpec(TraceJobSpec):
    """A profile has no options: its config's lanes are profiled with their TTLs."""


class ProfileRowPublic(BaseModel):
    """The summary of one lane (category null) or one request category of it, from SQL."""

    lane: int = Field(description="position of the lane in the config's instances, from 0")
    instance_id: str = Field(description="the lane's instance_id")
    category: str | None = Field(description="null: the lane as a whole")
    requests: int = Field(description="requests of the lane or category")
    input_tokens: int = Field(description="their input tokens")
    hit_tokens: int = Field(description="their hit tokens at infinite capacity (TTL applied)")
    ideal_hit_ratio: float = Field(description="hit tokens at infinite capacity (TTL applied) / input tokens")
    hit_token_share: float = Field(description="share of the lane's hit tokens")
    reuses: int = Field(description="hit blocks")
    reuse_p50_s: float | None = Field(description="median reuse time of a block, seconds")
    reuse_p90_s: float | None = Field(description="90th percentile of the reuse times, seconds")
    reuse_p99_s: float | None = Field(description="99th percentile of the reuse times, seconds")
    exp_rate_per_s: float | None = Field(description="exponential fit of the reuse times: 1 / mean")
    ks: float | None = Field(description="Kolmogorov-Smirnov distance of the reuse times to that fit")
    keys: int = Field(description="unique keys (in a category: first accessed by it)")
    lifespan_p50_s: float | None = Field(description="median time from a key's first to last access, seconds")
    never_reused_share: float = Field(description="share of keys accessed once only")
    keys_for_90: float = Field(description="smallest fraction of keys taking 90% of the reuses")
    requests_for_90: float = Field(description="smallest fraction of requests taking 90% of the hit tokens")


PROFILE_ROW_FIELDS: dict[str, tuple[str, ...]] = {
    "requests": ("requests",),
    "input_tokens": ("input_tokens",),
    "hit_tokens": ("hit_tokens",),
    "ideal_hit_ratio": ("ideal_hit_ratio",),
    "hit_token_share": ("hit_token_share",),
    "reuses": ("reuse_time", "count"),
    "reuse_p50_s": ("reuse_time", "p50_s"),
    "reuse_p90_s": ("reuse_time", "p90_s"),
    "reuse_p99_s": ("reuse_time", "p99_s"),
    "exp_rate_per_s": ("reuse_time", "exp_rate_per_s"),
    "ks": ("reuse_time", "ks"),
    "keys": ("lifespan", "keys"),
    "lifespan_p50_s": ("lifespan", "p50_s"),
    "never_reused_share": ("lifespan", "never_reused_share"),
    "keys_for_90": ("skew", "keys_for_90"),
    "requests_for_90": ("skew", "requests_for_90"),
}
"""Each metric column of a summary row and where it comes from in Metrics (a test holds the SQL
columns and the public row equal to this map, and every path to a field of Metrics)."""


def _value(metrics: Metrics, path: tuple[str, ...]) -> Any:
    value: Any = metrics
    for name in path:
        value = getattr(value, name)
    return value


def profile_rows(job_id: str, result: ProfileResult) -> list[ProfileRow]:
    """The summary rows: per lane, the lane (category NULL) then its categories."""
    from litehit.db.models import ProfileRow

    rows = []
    for i, lane in enumerate(result.lanes):
        named: list[tuple[str | None, Metrics]] = [(None, lane.overall), *lane.categories.items()]
        for k, (category, m) in enumerate(named):
            values = {column: _value(m, path) for column, path in PROFILE_ROW_FIELDS.items()}
            rows.append(ProfileRow(job_id=job_id, lane=i, row=k, instance_id=lane.lane, category=category, **values))
    return rows


class _Profiling:
    def __init__(self, plan: ReplayPlan, part: PartPlan) -> None:
        from litehit.profile.runs import ProfileRun

        self.run: ProfileRun = ProfileRun(plan.lanes[part.lane], plan.fmt)

    def feed(self, work: LaneWork) -> None:
        self.run.feed(work)

    def output(self, categories: list[str]) -> PartOutput:
        return PartOutput(self.run.result(categories))

    def settle(self) -> None:
        self.run.settle()

    def close(self) -> None:
        self.run.close()


class _ProfileMerger:
    def __init__(self, plan: ReplayPlan) -> None:
        self.fmt = plan.fmt

    def add_chunk(self, chunk: Any, outputs: Sequence[tuple[Any, ...]]) -> None:
        raise AssertionError("a profile's parts emit nothing per chunk")

    def finish(self, outputs: Sequence[PartOutput], counts: TraceCounts) -> Merged:
        lanes = [o.result for o in outputs]
        result = ProfileResult(trace_format=self.fmt.value, lanes=lanes)  # type: ignore[arg-type]
        return Merged(result, {"lanes": len(lanes)})

    def close(self) -> None:
        pass


class ProfileKind(TraceKind[ProfileJobSpec]):
    kind = Kind.PROFILE
    what = "workload profile"
    route = "/profiles"
    tasks = "profile"
    spec_model = ProfileJobSpec
    public_name = "ProfilePublic"
    part_stage = Stage.PROFILE
    part_view_name = "ProfileLanePublic"
    part_view_doc = "One lane of a profile; its whole entry is in profile.json once the job succeeded."
    view_paths: ClassVar[dict[str, tuple[tuple[str, ...], Any]]] = {"requests": (("overall", "requests"), 0)}
    cancelled = "profile cancelled; nothing published"
    summary_table = SummaryTable("ProfileRow")
    artifacts: ClassVar[tuple[Artifact, ...]] = (
        Artifact(
            path="profile.json",
            file=f"out/{PROFILE_RESULT_FILE}",
            media_type="application/json",
            summary="profile.json: every lane and its request categories (the same bytes as `litehit profile -o`)",
            link="result",
        ),
        Artifact(
            path="plots/{name}.{ext}",
            file=f"out/{PROFILE_PLOT_DIR}/{{name}}.{{ext}}",
            media_type={"png": "image/png", "svg": "image/svg+xml"},
            summary="A plot of the profile (reuse_time, lifespan, hit_share, working_set) as PNG or SVG",
            link="{name}",
            link_defaults={"ext": "png"},
            choices={"name": PLOT_NAMES, "ext": ("png", "svg")},
        ),
    )

    def plan_model(self) -> type[PartPlan]:
        return PartPlan

    def result_model(self) -> type[BaseModel]:
        return LaneProfile

    def parts(self, spec: ProfileJobSpec, plan: ReplayPlan) -> list[PartPlan]:
        return [PartPlan(lane=lane.index, instance_id=lane.instance_id) for lane in plan.lanes]

    def open_part(self, spec: ProfileJobSpec, plan: ReplayPlan, part: PartPlan) -> _Profiling:
        return _Profiling(plan, part)

    def merger(
        self, spec: ProfileJobSpec, runtime: ReplaySpec, plan: ReplayPlan, parts: Sequence[PartPlan]
    ) -> _ProfileMerger:
        return _ProfileMerger(plan)

    def summary_rows(self, job_id: str, value: Any, spec: ProfileJobSpec) -> list[Any]:
        return list(profile_rows(job_id, value))

    def extra_public_fields(self) -> dict[str, Any]:
        return {
            "summary": (
                list[ProfileRowPublic],
                Field(description="one row per lane and per lane x category, once succeeded"),
            ),
            **super().extra_public_fields(),
        }

    def view(self, job: dict[str, Any], parts: list[dict[str, Any]], summaries: list[dict[str, Any]]) -> dict[str, Any]:
        return {**super().view(job, parts, summaries), "summary": summaries}

    def summary_order(self) -> tuple[str, ...]:
        return ("lane", "row")

    def publish(self, value: Any, out: Path) -> Path:
        from litehit.profile.plot import plot_profile
        from litehit.publish import publish_bytes

        path = publish_bytes(out / PROFILE_RESULT_FILE, value.json_bytes())
        plot_profile(value, out / PROFILE_PLOT_DIR)
        return path


KIND = ProfileKind()
