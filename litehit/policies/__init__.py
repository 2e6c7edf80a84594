"""Eviction-policy what-if: each lane simulated at fixed capacities under LRU, FIFO, LFU, GDFS and
the workload-aware policy (the C simulator behind core_c.PolicySim), one pass over the trace.

- ``options``: what a sweep asks for (policies, capacities, WA parameters), validated.
- ``runs``: one simulation (lane x policy x capacity) fed LaneWork chunk by chunk, and its tally.
- ``sweep``: the simulations of a sweep and policies.json from their results (the job kind,
  litehit.jobs.policy_sweep, runs them in process or as tasks).
- ``result``: the documented shape of policies.json.
- ``plot``: hit ratio over capacity per policy.
"""
