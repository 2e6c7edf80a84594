"""The jobs in SQL as Prometheus metrics, read at scrape time (the row is the truth about a job,
so the numbers are the same whichever API process answers the scrape):

- ``litehit_jobs{kind, state}``: how many job rows are in each state (one GROUP BY);
- ``litehit_job_duration_seconds{kind, state}``: a histogram of every ended job's time from
  submission (``created_at``) to its end (``finished_at``), queueing included. The database
  computes the buckets in one GROUP BY over the ended rows, so the histogram is exact and
  cumulative: it only grows as jobs end (it shrinks only if rows are deleted). PostgreSQL
  subtracts the timestamps to the microsecond; SQLite's date functions keep milliseconds;
- ``litehit_database_up``: 1 when these queries succeeded, 0 when the database did not answer
  (then the job metrics are left out of the scrape and the rest is served).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from sqlalchemy import ColumnElement, case, func, select
from sqlalchemy.exc import SQLAlchemyError

from litehit.db.models import Job
from litehit.db.session import get_engine
from litehit.db.states import TERMINAL, JobState
from litehit.jobs.kinds import Kind

__all__ = ["DURATION_BUCKETS", "JobCollector"]

log = logging.getLogger("litehit.api")

DURATION_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0)
"""Upper bounds (seconds) of the job duration histogram; +Inf is added."""


def _duration(dialect: str) -> ColumnElement[Any]:
    """finished_at - created_at in seconds, in the database's own arithmetic."""
    if dialect == "postgresql":
        return func.extract("epoch", Job.finished_at - Job.created_at)
    # julianday() counts in whole milliseconds internally: rounding the product recovers them
    return func.round((func.julianday(Job.finished_at) - func.julianday(Job.created_at)) * 86_400_000) / 1000.0


class JobCollector:
    """Reads the jobs table of `db_url` at every collect() (a prometheus_client collector)."""

    def __init__(self, db_url: str) -> None:
        self.db_url = db_url

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("litehit_database_up", "1 when the scrape-time job queries succeeded, else 0")
        try:
            counts, durations = self._read()
        except SQLAlchemyError as exc:
            log.warning("metrics: the job queries failed: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        jobs = GaugeMetricFamily("litehit_jobs", "Job rows in SQL by kind and state", labels=["kind", "state"])
        for kind in sorted({k.value for k in Kind} | {k for k, _ in counts}):
            for state in JobState:
                jobs.add_metric([kind, state.value], counts.get((kind, state.value), 0))
        yield jobs
        histogram = HistogramMetricFamily(
            "litehit_job_duration_seconds",
            "Ended jobs' time from submission to end (created_at to finished_at), by kind and end state",
            labels=["kind", "state"],
        )
        bounds = [*(f"{b}" for b in DURATION_BUCKETS), "+Inf"]
        for (kind, end), (buckets, total, count) in sorted(durations.items()):
            histogram.add_metric([kind, end], list(zip(bounds, [*buckets, count], strict=True)), total)
        yield histogram

    def _read(
        self,
    ) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], tuple[list[int], float, int]]]:
        engine = get_engine(self.db_url)
        seconds = _duration(engine.dialect.name)
        ended = [s.value for s in TERMINAL]
        bucket_columns = [func.sum(case((seconds <= b, 1), else_=0)) for b in DURATION_BUCKETS]
        with engine.connect() as conn:
            counts = {
                (kind, str(state)): int(n)
                for kind, state, n in conn.execute(
                    select(Job.kind, Job.state, func.count()).group_by(Job.kind, Job.state)
                )
            }
            rows = conn.execute(
                select(Job.kind, Job.state, func.count(), func.sum(seconds), *bucket_columns)
                .where(Job.state.in_(ended), Job.finished_at.is_not(None))
                .group_by(Job.kind, Job.state)
            ).all()
        durations = {
            (kind, str(state)): ([int(b or 0) for b in buckets], float(total or 0), int(n))
            for kind, state, n, total, *buckets in rows
        }
        return counts, durations
