"""Nexmark's auction events (persons, auctions, bids), made as Nexmark's generator makes them and written
to Kafka as its `kafka` table reads them, or to Parquet; `python -m jobs.tools.nexmark` runs it.

Modules: `config` (the parameters), `events` (the records), `ids` and `timeline` (the id and time rules),
`values` and `channels` (the drawn fields), `generator`, `layout` (the table's columns, JSON and Arrow),
`kafka_writer`, `parquet_writer`, `summary`. The Nexmark oracle: `queries/` (the query set as Flink SQL
scripts), `oracle` (each query on Flink and as a dagger over the same topic, compared; `python -m
jobs.tools.nexmark.oracle`) and `flink_job` (Flink's side, run by PyFlink's interpreter). Only tests and
benchmarks import it.
"""
