"""Stream kinds, one package each (`jobs.model.registry` lists them); the reader contract is in
`stream_batches`."""
