"""The Celery adapter of LiteHit: the app and its signals, and the tasks generated from the job
registry (litehit.jobs). No job logic lives here."""
