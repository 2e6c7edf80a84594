"""Job kinds: every analysis is one module here (its typed spec, its parts, ``run_part`` and
``merge``), registered in litehit.jobs.kinds. The CLI folds a kind's parts in process
(litehit.jobs.local); the service runs the same parts as tasks (litehit.jobs.stages) and calls the
same merge. Submission, the job state machine, recovery and the CLI's run records are here too,
generic over the registry."""
