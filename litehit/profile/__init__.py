"""Workload profile (seed 004 §3, §5.1-5.3): who reuses what, how soon, for how long, and how
much cache that needs, per lane and per request category, at infinite capacity with each lane's
TTL.

- ``runs``: one lane's exact lane core and ProfileRecorder fed LaneWork in order, and its profile.
- ``metrics``: the metrics from the recorded arrays (numpy; nearest-rank quantiles, exact sums).
- the job kind (litehit.jobs.profile) runs the lanes, in process or as tasks, and merges them.
- ``result``: the documented shape of profile.json.
- ``plot``: reuse-time CDFs with their exponential fits, lifespan CDFs, hit-token contribution
  per category and the working set over time.
"""
