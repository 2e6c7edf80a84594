"""Workload profiles: every lane replayed at infinite capacity with its TTL, one task per lane; the
summary per lane and per lane x request category in SQL, profile.json and the plots."""

from __future__ import annotations

from api.examples import PROFILE_EXAMPLES
from api.routes.analysis_jobs import AnalysisJob, analysis_job_router
from api.routes.common import profile_lane_rows, profile_summary_rows
from api.schemas import ProfileCreate, ProfilePublic
from litehit.profile.plot import PLOT_NAMES
from litehit.storage import PROFILE_PLOT_DIR, PROFILE_RESULT_FILE
from worker.jobs.submit import PROFILE_KIND, PROFILE_PARSE_TASK, create_profile_job

router = analysis_job_router(
    AnalysisJob(
        prefix="/profiles",
        what="workload profile",
        kind=PROFILE_KIND,
        options_field=None,
        parts_field="lanes",
        create_model=ProfileCreate,
        public_model=ProfilePublic,
        create=create_profile_job,
        first_task=PROFILE_PARSE_TASK,
        part_rows=profile_lane_rows,
        result_route="profile.json",
        result_file=PROFILE_RESULT_FILE,
        plot_file=PROFILE_PLOT_DIR,
        result_summary="profile.json: every lane and its request categories (the same bytes as `litehit profile -o`)",
        examples=PROFILE_EXAMPLES,
        plot_summary="A plot of the profile (reuse_time, lifespan, hit_share, working_set) as PNG or SVG",
        plot_names=PLOT_NAMES,
        summary_rows=profile_summary_rows,
    )
)
