"""Property-based tests over processor configs embedded in a dagger file, and SQL errors before start.

Each example starts from a valid config of one processor kind (every transformer, every enrichment, an
internal source) and mutates it: keys dropped, values replaced by arbitrary YAML-like values (the value
strategy of `tests.spec_documents`, plus values that look almost right: placeholders, JSONPaths, type names),
unknown keys added. Loading must either succeed or fail with a `DaggerConfigError` whose every problem
names a key under the processor's own path; a config that loads must then build (with Spark analysis)
or fail with a `DaggerBuildError` naming that path. Nothing else may escape.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from jobs.model.spec import DaggerConfigError, parse_dagger
from jobs.processors import config as processor_config
from jobs.running.runner import DaggerBuildError, build_dagger
from tests.spec_documents import SOURCE, document, json_values
from tests.spec_documents import kafka_stream as booking_stream

ORDER_COLUMNS = ["order_id", "customer_id", "amount", "created_at"]

TRANSFORMERS: dict[str, dict[str, Any]] = {
    "invalid_record_filter": {"kind": "invalid_record_filter"},
    "deduplicate": {"kind": "deduplicate", "key_column": "order_id", "ttl": "10m"},
    "hash": {"kind": "hash", "columns": ["customer_id"]},
    "clear_column": {"kind": "clear_column", "column": "customer_id"},
    "sql": {"kind": "sql", "sql": "SELECT *, amount * 2 AS doubled FROM t", "table": "t"},
    "custom": {
        "kind": "custom",
        "transformer": "tests.custom_transformer:label_rows",
        "arguments": {"label": "x"},
    },
    "plugin": {
        "kind": "plugin",
        "command": ["node", "enrich.mjs"],
        "output_schema": "*, tier STRING",
        "batch_size": 10,
        "timeout": "5s",
        "environment": {"MODE": "test"},
        "arguments": {"min": 1},
    },
}
ENRICHMENTS: dict[str, dict[str, Any]] = {
    "http": {
        "endpoint": "http://127.0.0.1:9/customers/%s",
        "endpoint_variables": ["customer_id"],
        "verb": "post",
        "request_pattern": '{"amount": %s}',
        "request_variables": ["amount"],
        "headers": {"Authorization": "Bearer t"},
        "header_pattern": '{"X-Order": "%s"}',
        "header_variables": ["order_id"],
        "output_mapping": {"name": "$.name", "visits": {"path": "$.visits", "type": "BIGINT"}},
    },
    "elasticsearch": {
        "hosts": ["http://127.0.0.1:9"],
        "endpoint_pattern": "/customers/_doc/%s",
        "endpoint_variables": ["customer_id"],
        "username": "u",
        "password": "p",
        "output_mapping": {"city": "$._source.city"},
    },
    "postgres": {
        "host": "127.0.0.1",
        "port": 9,
        "user": "u",
        "database": "d",
        "query_pattern": "SELECT name FROM customers WHERE customer_id = %s",
        "query_variables": ["customer_id"],
        "idle_timeout": "1m",
        "output_mapping": {"name": "name"},
    },
    "grpc": {
        "endpoint": "127.0.0.1:9",
        "method": "dagger.testing.EnrichmentService/Lookup",
        "request_message": "dagger.testing.CustomerLookup",
        "response_message": "dagger.testing.CustomerProfile",
        "request_pattern": "{'customer_id': '%s', 'amount': %s}",
        "request_variables": ["customer_id", "amount"],
        "headers": {"x-caller": "dagger"},
        "output_mapping": {"profile_name": "$.name"},
    },
    "internal": {"output_field": "origin", "type": "constant", "value": "kafka"},
}
BASES = {**TRANSFORMERS, **ENRICHMENTS}
# Optional keys a base config leaves out, so mutations may add them too.
_ENRICHMENT_KEYS = sorted(processor_config.Enrichment.model_fields)
_KNOWN_KEYS = {
    kind: sorted(
        {*base, *(_ENRICHMENT_KEYS if kind in ENRICHMENTS and kind != "internal" else [])}
        | ({"descriptor_sets"} if kind == "grpc" else set())
        | ({"name"} if kind == "plugin" else set())
    )
    for kind, base in BASES.items()
}
_ALMOST_RIGHT = st.sampled_from(
    [
        "%s",
        "a %s b %s",
        "%%s",
        "$.name",
        "$.data[?",
        "INT",
        "NOT_A_TYPE",
        "http://127.0.0.1:9/%s",
        "127.0.0.1:9",
        "p.S/M",
        "dagger.testing.Nope",
        "SELECT * FROM data_stream",
        "SELECT nope FROM t",
        "*",
        "order_id",
        "nope",
        "CURRENT_TIMESTAMP",
        "JSON_PAYLOAD",
        "sql",
        "function",
        "5s",
        "-1",
        "'a%s'",
    ]
)
_VALUES = json_values | _ALMOST_RIGHT | st.lists(st.sampled_from([*ORDER_COLUMNS, "nope", ""]), max_size=3)


@st.composite
def mutated(draw: st.DrawFn, kinds: list[str]) -> tuple[str, dict[str, Any]]:
    kind = draw(st.sampled_from(kinds))
    config = copy.deepcopy(BASES[kind])
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from([*_KNOWN_KEYS[kind], "unknown_key"]) | st.text(max_size=6))
        if draw(st.booleans()):
            config.pop(key, None)
        else:
            config[key] = draw(_VALUES)
    return kind, config


# Values of the right shape that a config check cannot judge: they fail, if at all, when the dagger is built
# against the real columns, schema registry and SQL.
PLAUSIBLE_BUT_WRONG: dict[str, dict[str, list[Any]]] = {
    "deduplicate": {"key_column": ["nope", "rowtime", "amount"], "ttl": ["0s", "1d"]},
    "hash": {
        "columns": [["nope"], ["amount"], ["order_id", "order_id"], ["created_at.seconds"], ["order_id"]]
    },
    "clear_column": {"column": ["nope", "amount", "created_at"]},
    "sql": {
        "sql": ["SELECT nope FROM t", "SELECT * FROM elsewhere", "SELEC 1", "SELECT order_id FROM t"],
        "table": ["orders", "data_stream", "t2"],
    },
    "http": {
        "endpoint_variables": [["nope"], ["created_at"]],
        "output_mapping": [
            {"n": "$.data[?"},
            {"order_id": "$.x"},
            {"n": {"path": "$.n", "type": "NOT_A_TYPE"}},
        ],
        "header_pattern": ["X-Order: %s", '{"X-Order": %s}'],
    },
    "elasticsearch": {
        "endpoint_variables": [["nope"]],
        "output_mapping": [{"c": "$..[?"}, {"amount": "$.a"}, {"c": {"path": "$.c", "type": "MAP<STRING"}}],
    },
    "postgres": {
        "query_variables": [["nope"], ["amount"]],
        "query_pattern": [
            "SELECT name FROM customers WHERE customer_id LIKE 'a%s'",
            "SELECT name FROM customers WHERE customer_id = %s AND name LIKE 'a%'",
        ],
        "output_mapping": [{"amount": "name"}, {"n": {"path": "name", "type": "STRUCT<"}}],
    },
    "grpc": {
        "request_message": ["dagger.testing.Nope", "dagger.testing.Order"],
        "response_message": ["x.Y"],
        "request_pattern": ["{'customer_id': '%s', 'amount': %s", "{'customer_id': %s, 'amount': '%s'}"],
        "request_variables": [["customer_id", "nope"], ["amount", "customer_id"]],
        "output_mapping": [{"p": "$.["}, {"order_id": "$.name"}],
        "descriptor_sets": [["/nonexistent/descriptor_set.pb"]],
    },
    "internal": {
        "type": ["sql", "function"],
        "value": ["nope", "*", "JSON_PAYLOAD"],
        "output_field": ["*", "x"],
    },
}


@st.composite
def plausible_but_wrong(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    kind = draw(st.sampled_from(sorted(PLAUSIBLE_BUT_WRONG)))
    config = copy.deepcopy(BASES[kind])
    keys = draw(
        st.lists(st.sampled_from(sorted(PLAUSIBLE_BUT_WRONG[kind])), min_size=1, max_size=2, unique=True)
    )
    for key in keys:
        config[key] = copy.deepcopy(draw(st.sampled_from(PLAUSIBLE_BUT_WRONG[kind][key])))
    return kind, config


def embedded(kind: str, config: dict[str, Any], where: str, stream: dict[str, Any]) -> tuple[dict, str]:
    """A dagger document holding `config`, and the key path of the processor in it."""
    if kind in TRANSFORMERS and where == "pre":
        return {"streams": [{**stream, "pre_processors": [config]}]}, "streams[0].pre_processors[0]"
    section = "transformers" if kind in TRANSFORMERS else kind
    return {"streams": [stream], "post_processors": {section: [config]}}, f"post_processors.{section}[0]"


def load(data: dict[str, Any], key: str):
    """The spec, or None after checking that the error names only keys under `key`."""
    try:
        return parse_dagger(copy.deepcopy(data), SOURCE, base_dir="/daggers")
    except DaggerConfigError as error:
        header, *problems = str(error).splitlines()
        assert header.startswith(f"{SOURCE}: ")
        if not problems:  # a ${VAR} that is not set: one line, naming where it was used
            assert header.startswith(f"{SOURCE}: {key}"), header
        for problem in problems:
            assert problem.strip().startswith(key), (key, problem)
        return None


ORDERS_STREAM = {
    "kind": "kafka",
    "table": "orders",
    "proto_message": "dagger.testing.Order",
    "event_time_field": "created_at",
    "topics": ["unused"],
    "bootstrap_servers": "127.0.0.1:9",
}
# Building a plugin or custom transformer runs the user's program or code: mutated names could be anything.
_STARTS_PROGRAMS = {"plugin", "custom"}


def orders_document(descriptor_set, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "fuzz",
        "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
        "sql": f"SELECT {', '.join(ORDER_COLUMNS)} FROM orders",
        "sinks": [{"kind": "log"}],
        **data,
    }


_PROPERTY: dict[str, Any] = {
    "deadline": None,
    "database": None,
    "derandomize": True,
    "suppress_health_check": list(HealthCheck),
}


@settings(max_examples=400, **_PROPERTY)
@given(processor=mutated([*TRANSFORMERS, *ENRICHMENTS]), where=st.sampled_from(["pre", "post"]))
def test_mutated_processor_configs_fail_only_with_config_errors_naming_their_key(
    processor: tuple[str, dict[str, Any]], where: str
) -> None:
    kind, config = processor
    data, key = embedded(kind, config, where, booking_stream())
    event("loads" if load(document(**data), key) else "config error")


@pytest.mark.parametrize(
    ("kind", "where"), [*((kind, "pre") for kind in TRANSFORMERS), *((kind, "post") for kind in BASES)]
)
def test_every_base_config_is_valid(descriptor_set, spark, registry, kind, where):
    """The starting points of the property tests load and build, so mutations test what they say."""
    data, key = embedded(kind, copy.deepcopy(BASES[kind]), where, ORDERS_STREAM)
    spec = load(orders_document(descriptor_set, data), key)
    assert spec is not None
    if kind not in _STARTS_PROGRAMS:
        build_dagger(spark, spec, registry)


@settings(max_examples=40, **_PROPERTY)
@given(
    processor=st.one_of(
        plausible_but_wrong(),
        plausible_but_wrong(),
        mutated([kind for kind in [*TRANSFORMERS, *ENRICHMENTS] if kind not in _STARTS_PROGRAMS]),
    ),
    where=st.sampled_from(["pre", "post"]),
)
def test_processor_configs_that_load_build_or_fail_naming_their_key(
    descriptor_set, spark, registry, processor: tuple[str, dict[str, Any]], where: str
) -> None:
    kind, config = processor
    data, key = embedded(kind, config, where, ORDERS_STREAM)
    spec = load(orders_document(descriptor_set, data), key)
    if spec is None:
        event("config error")
        return
    try:
        build_dagger(spark, spec, registry)
        event("builds")
    except DaggerBuildError as error:
        event("build error")
        # A pre-processor that drops or renames a column the dagger's SQL reads fails that SQL instead.
        message = str(error)
        assert f"{key}: " in message or message.startswith("dagger fuzz: SQL error at line "), message


# --------------------------------------------------------------------------------------------------------
# SQL and columns that do not exist: an error before start, with the position and the processor's key
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("post", "message"),
    [
        (
            {"transformers": [{"kind": "sql", "sql": "SELECT order_id,\n       amont FROM data_stream"}]},
            r"dagger fuzz: post_processors\.transformers\[0\]: sql: SQL error at line 2, column 8 "
            r"\('amont'\): \[UNRESOLVED_COLUMN",
        ),
        (
            {"transformers": [{"kind": "sql", "sql": "SELECT * FROM data_streams"}]},
            r"post_processors\.transformers\[0\]: sql: SQL error at line 1, column 15 "
            r"\('data_streams'\): \[TABLE_OR_VIEW_NOT_FOUND",
        ),
        (
            {"transformers": [{"kind": "sql", "sql": "SELECT o FROM orders_out", "table": "orders_out"}]},
            r"post_processors\.transformers\[0\]: sql: SQL error at line 1, column 8 \('o'\)",
        ),
        (
            {"elasticsearch": [{**ENRICHMENTS["elasticsearch"], "endpoint_variables": ["customer"]}]},
            r"post_processors\.elasticsearch\[0\]: variable column\(s\) customer not in the result "
            r"\(columns: order_id, customer_id, amount, created_at\)",
        ),
        (
            {"grpc": [{**ENRICHMENTS["grpc"], "request_variables": ["customer_id", "amont"]}]},
            r"post_processors\.grpc\[0\]: variable column\(s\) amont not in the result",
        ),
        (
            {
                "http": [ENRICHMENTS["http"]],
                "transformers": [{"kind": "clear_column", "column": "customer_id"}],
            },
            r"post_processors\.transformers\[0\]: clear_column: no column 'customer_id' "
            r"\(columns: name, visits\)",  # enrichment keeps only its outputs, as in Dagger
        ),
    ],
)
def test_unknown_tables_and_columns_in_post_processors_fail_before_start(
    descriptor_set, spark, registry, post, message
):
    spec = parse_dagger(
        orders_document(descriptor_set, {"streams": [ORDERS_STREAM], "post_processors": post})
    )
    with pytest.raises(DaggerBuildError, match=message):
        build_dagger(spark, spec, registry)


def test_a_pre_processor_sql_error_names_the_stream_position_and_line(descriptor_set, spark, registry):
    stream = {
        **ORDERS_STREAM,
        "pre_processors": [
            {"kind": "clear_column", "column": "customer_id"},
            {"kind": "sql", "sql": "SELECT order_id\nFROM orders\nWHERE amount > 1 AND customr_id = ''"},
        ],
    }
    spec = parse_dagger(orders_document(descriptor_set, {"streams": [stream]}))
    with pytest.raises(
        DaggerBuildError,
        match=r"dagger fuzz: streams\[0\]\.pre_processors\[1\]: sql: SQL error at line 3, column 22 "
        r"\('customr_id'\): \[UNRESOLVED_COLUMN",
    ):
        build_dagger(spark, spec, registry)
