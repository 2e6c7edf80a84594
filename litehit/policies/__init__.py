"""Eviction-policy what-if: each lane simulated at fixed capacities under LRU, FIFO, LFU, GDFS and
the workload-aware policy (the C simulator behind core_c.PolicySim), one pass over the trace.

- ``options``: what a sweep asks for (policies, capacities, WA parameters), validated.
- ``runs``: one simulation (lane x policy x capacity) fed LaneWork chunk by chunk, and its tally.
- ``sweep``: the CLI's in-process sweep over a trace; the service runs the same runs per task.
- ``result``: the documented shape of policies.json.
- ``plot``: hit ratio over capacity per policy.
"""
