"""Running a dagger: one streaming query built from the model, started, watched, stopped and restarted.

Holds the runner, the streams as the SQL's tables (`stream_tables`), progress, checkpoints and their lock,
real-time mode, time-ordered output, the launch of a submitted run, and the broker's side of demand.

May import: everything below it (`jobs.model`, the kinds' packages, `jobs.engine`); nothing in `jobs`
imports it but the command line, the Dagster code location and the tools.
"""
