"""Event collection, the front door Rakam describes: apps send JSON events to a collection, each event is
stored as Avro under the collection's schema, which grows with the properties the events bring.

Work in progress (issue 16): `schema` (types inferred from JSON, the schema grown append-only).
"""
