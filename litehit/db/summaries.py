"""Query summaries in SQL: one row per (instance, capacity slot), plus the totals."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import delete
from sqlalchemy.orm import Session

from litehit.db.models import QuerySummary

if TYPE_CHECKING:
    from litehit.query import QueryResult, Summary

__all__ = ["record_summaries"]


def record_summaries(session: Session, job_id: str, result: QueryResult) -> None:
    """One row per (instance, slot) and per slot of the total; replaces earlier rows."""
    session.execute(delete(QuerySummary).where(QuerySummary.job_id == job_id))

    def rows(summary: Summary, is_total: bool) -> list[QuerySummary]:
        name = "" if summary.instance_id is None else summary.instance_id.decode("utf-8", "replace")
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
    session.add_all(rows(result.total, True))
