"""Live eviction attribution (seed 003): why a prefix-cache lookup missed on one worker, from
that worker's KV events. ``events`` holds the event types every source produces (HTTP batches,
the vLLM/SGLang ZMQ subscriber); ``store`` keeps the evidence and answers lookups; ``owner`` is the
sharded process that serves them."""
