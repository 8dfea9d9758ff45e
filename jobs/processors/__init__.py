"""Pre- and post-processors: transformers on a stream's rows or the SQL's result, external enrichments
(HTTP, Elasticsearch, Postgres, gRPC), internal fields and JSON-RPC plugins; `config` holds their keys."""
