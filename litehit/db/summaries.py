"""Query summaries in SQL: one row per (instance, capacity slot), plus the totals: one total
(instance_id "") when the lanes share one setup or their setups are unknown, else one total per
setup (instance_id = the setup's key) and none across setups (litehit.setups)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy import delete
from sqlalchemy.orm import Session

from litehit.db.models import QuerySummary

if TYPE_CHECKING:
    from litehit.query import QueryResult, Summary
    from litehit.setups import SetupTotal

__all__ = ["record_summaries"]


def record_summaries(session: Session, job_id: str, result: QueryResult, totals: Sequence[SetupTotal] = ()) -> None:
    """One row per (instance, slot) and per slot of each total; replaces earlier rows. totals:
    the result's totals per setup (more than one: they replace the total across setups)."""
    session.execute(delete(QuerySummary).where(QuerySummary.job_id == job_id))

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

    for summary in result.instances:
        session.add_all(rows(summary, False))
    if len(totals) > 1:
        for total in totals:
            session.add_all(rows(total.summary, True, total.setup.key))
    else:
        session.add_all(rows(result.total, True))
