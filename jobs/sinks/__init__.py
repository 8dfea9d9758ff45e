"""Sink kinds, one package each (`jobs.registry` lists them); the writer contract is in `base`."""
