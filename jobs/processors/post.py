"""Post-processors on the SQL result, in Dagger's order: external enrichments (http, elasticsearch,
postgres, grpc), internal sources, transformers.

With any external or internal source, the output is rebuilt as in Dagger: the enrichments' output fields
(in that order), then the internal sources' fields; an internal `sql` source with `output_field: "*"` and
`value: "*"` puts every SQL column there instead.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.metrics.stages import ROWS_IN, ROWS_OUT, counted
from jobs.processors.config import (
    ElasticsearchEnrichment,
    Enrichment,
    GrpcEnrichment,
    HttpEnrichment,
    InternalSource,
    PostgresEnrichment,
    PostProcessors,
)
from jobs.processors.context import TransformContext
from jobs.processors.transformers import apply_transformer

POST_TABLE = "data_stream"


def apply_post_processors(frame: DataFrame, post: PostProcessors, context: TransformContext) -> DataFrame:
    sql_columns = frame.columns
    for key, kind, enrichment in post.keyed_enrichments():
        step_context = replace(context, key=key)
        _require_deployment_keys(enrichment, step_context, f"{kind}_enrichment")
        frame = counted(frame, ROWS_IN, key, enabled=context.count_rows)
        frame = counted(_enrich(frame, enrichment, step_context), ROWS_OUT, key, enabled=context.count_rows)
    if post.reshapes_output:
        outputs = [
            F.col(f"`{name}`") for enrichment in post.enrichments for name in enrichment.output_mapping
        ]
        for index, source in enumerate(post.internal):
            outputs.extend(
                _internal(source, sql_columns, replace(context, key=f"post_processors.internal[{index}]"))
            )
        frame = frame.select(*outputs)
    for index, transformer in enumerate(post.transformers):
        frame = apply_transformer(
            frame, transformer, replace(context, key=f"post_processors.transformers[{index}]")
        )
    return frame


def _require_deployment_keys(enrichment: Enrichment, context: TransformContext, resource_key: str) -> None:
    """An enrichment may leave its service to the deployment's resource (`resource_key`), but it must be
    known now: from the dagger file or from the resource."""
    missing = [key for key in enrichment.deployment_keys if getattr(enrichment, key) is None]
    if missing:
        raise context.error(
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set (set it in the dagger "
            f"file, or in the {resource_key} resource of the Dagster deployment)"
        )


def _enrich(
    frame: DataFrame,
    enrichment: HttpEnrichment | ElasticsearchEnrichment | PostgresEnrichment | GrpcEnrichment,
    context: TransformContext,
) -> DataFrame:
    if isinstance(enrichment, HttpEnrichment):
        from jobs.processors.enrichment.http import enrich_http

        return enrich_http(frame, enrichment, context)
    if isinstance(enrichment, ElasticsearchEnrichment):
        from jobs.processors.enrichment.elasticsearch import enrich_elasticsearch

        return enrich_elasticsearch(frame, enrichment, context)
    if isinstance(enrichment, PostgresEnrichment):
        from jobs.processors.enrichment.postgres import enrich_postgres

        return enrich_postgres(frame, enrichment, context)
    from jobs.processors.enrichment.grpc import enrich_grpc

    return enrich_grpc(frame, enrichment, context)


def _internal(source: InternalSource, sql_columns: list[str], context: TransformContext) -> list[Column]:
    if source.type == "sql":
        if source.value == "*":
            every = [F.col(f"`{name}`") for name in sql_columns]
            return every if source.output_field == "*" else [F.struct(*every).alias(source.output_field)]
        if source.value not in sql_columns:
            raise context.error(
                f"internal sql source: no column {source.value!r} in the SQL result "
                f"(columns: {', '.join(sql_columns)})"
            )
        return [F.col(f"`{source.value}`").alias(source.output_field)]
    if source.type == "constant":
        return [F.lit(source.value).alias(source.output_field)]
    if source.value == "CURRENT_TIMESTAMP":
        return [F.current_timestamp().alias(source.output_field)]
    every = [F.col(f"`{name}`") for name in sql_columns]
    return [F.to_json(F.struct(*every)).alias(source.output_field)]  # JSON_PAYLOAD
