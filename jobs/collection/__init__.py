"""Event collection, the front door Rakam describes: apps send JSON events to a collection, each event is
stored as Avro under the collection's schema, which grows with the properties the events bring.

    schema     types inferred from JSON values, a collection's schema grown append-only (nullable fields)
    registry   projects, hashed write keys and schema versions in PostgreSQL (the metadata database)
    delivery   Confluent wire-format Avro records, produced with acks=all to `<project>.<collection>`
    api        the Collection API (Starlette): a request taken whole or refused with nothing written
    confluent  the schemas through the Confluent Schema Registry REST API subset

`dagger collect` serves it (`jobs/cli/collect.py`); `jobs.codec.avro` decodes the records in streams.
"""
