"""The SQL database: models (the job row is the truth about a job), engine and sessions."""
