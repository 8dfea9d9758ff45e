"""The dagger's model: what a dagger file declares, validated, before anything runs.

Holds the file (`spec`), the file resolved once into what building it needs (`plan`), the value types its
keys share (`config`), the registry of stream and sink kinds (`registry`), the SQL stage (`sql`), the
protobuf descriptors (`schema_registry`), the errors a dagger raises (`errors`), time partitions and
demand templates.

May import: `jobs.engine` and `jobs.project`, and each kind's `config` module (the registry lists them);
the SQL stage and the plan also what they resolve with (Dagger's SQL passes, the Flink translator, the
codec's type handler); never `jobs.running`.
"""
