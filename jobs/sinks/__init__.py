"""Sink kinds, one package each (`jobs.model.registry` lists them); the writer contract is in `base`."""
