"""Stream kinds, one package each (`jobs.registry` lists them); the reader contract is in `stream_batches`."""
