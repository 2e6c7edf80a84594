"""Eviction-attribution window sizing (seed 003, issue 12 part A): how long a diagnostic set of
recently evicted block keys must remember an eviction so that a later miss on that key can still
be labelled ``evicted`` rather than ``no_match``, and what that set costs.

Each lane is simulated at one fixed capacity under one eviction policy (core_c.PolicySim with miss
evidence); every request that misses gets the outcome of its first uncached block, and the delay
from that key's latest eviction to the request.

- ``options``: what a sizing asks for (policy, capacity, coverage target, entry size, ...), validated.
- ``delays``: nearest-rank delay quantiles, the coverage table and the smallest window reaching
  the target.
- ``memory``: the ring of time buckets and the memory estimate E x W x S / L.
- ``runs``: one lane's simulation fed LaneWork chunk by chunk, and its tally.
- the job kind (litehit.jobs.window) runs the lanes, in process or as tasks, and merges them.
- ``result``: the documented shape of window.json.
- ``plot``: coverage over window length (log x), one panel per lane.
"""
