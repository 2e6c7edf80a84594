"""Policy sweeps: each lane under LRU, FIFO, LFU, GDFS and WA at fixed capacities, one task per
simulation; results in SQL (one row per lane x policy x capacity) and policies.json + a plot."""

from __future__ import annotations

from api.examples import SWEEP_EXAMPLES
from api.routes.analysis_jobs import AnalysisJob, analysis_job_router
from api.routes.common import run_rows
from api.schemas import PolicySweepCreate, PolicySweepPublic
from litehit.storage import SWEEP_PLOT_FILE, SWEEP_RESULT_FILE
from worker.jobs.submit import SWEEP_KIND, SWEEP_PARSE_TASK, create_sweep_job

router = analysis_job_router(
    AnalysisJob(
        prefix="/policy-sweeps",
        what="policy sweep",
        kind=SWEEP_KIND,
        options_field="sweep",
        parts_field="runs",
        create_model=PolicySweepCreate,
        public_model=PolicySweepPublic,
        create=create_sweep_job,
        first_task=SWEEP_PARSE_TASK,
        part_rows=run_rows,
        result_route="result.json",
        result_file=SWEEP_RESULT_FILE,
        plot_file=SWEEP_PLOT_FILE,
        result_summary="policies.json: every lane x policy x capacity (the same bytes as `litehit policies -o`)",
        examples=SWEEP_EXAMPLES,
        plot_summary="Hit ratio over capacity, one line per policy, one panel per lane",
    )
)
