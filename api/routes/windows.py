"""Window sizings: every lane simulated at one capacity under one policy, one task per lane; the
eviction-attribution window per lane in SQL (one row per lane) and window.json + a plot."""

from __future__ import annotations

from api.examples import WINDOW_EXAMPLES
from api.routes.analysis_jobs import AnalysisJob, analysis_job_router
from api.routes.common import window_lane_rows
from api.schemas import WindowCreate, WindowPublic
from litehit.storage import WINDOW_PLOT_FILE, WINDOW_RESULT_FILE
from worker.jobs.submit import WINDOW_KIND, WINDOW_PARSE_TASK, create_window_job

router = analysis_job_router(
    AnalysisJob(
        prefix="/windows",
        what="window sizing",
        kind=WINDOW_KIND,
        options_field="window",
        parts_field="lanes",
        create_model=WindowCreate,
        public_model=WindowPublic,
        create=create_window_job,
        first_task=WINDOW_PARSE_TASK,
        part_rows=window_lane_rows,
        result_route="window.json",
        result_file=WINDOW_RESULT_FILE,
        plot_file=WINDOW_PLOT_FILE,
        result_summary="window.json: every lane and all lanes together (the same bytes as `litehit window -o`)",
        examples=WINDOW_EXAMPLES,
        plot_summary="Coverage of evicted misses over window length (log x), one panel per lane",
    )
)
