"""Job logic shared by the Celery tasks and the CLI: plain functions over the job rows."""
