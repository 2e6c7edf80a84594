"""Routing what-if across replicas (issue 23): what hit rate and load balance N identical
replicas would get under a request router, from one pass over the trace.

A router that does not look at cache state (round_robin, random, session, prefix_hash) sends each
request to one replica whatever the capacities are, so every replica is an ordinary lane with its
own capacity-independent facts: one pass answers every per-replica capacity exactly.

- ``options``: what a routing what-if asks for (replicas, routers, capacities, ...), validated.
- ``routers``: the routing rules, as the replay plan's lane assigner (litehit.replay.plan).
- ``document``: routes.json from the published per-router facts, through the projector.
- ``plot``: hit rate against per-replica capacity per router, and the load imbalance.
"""
