"""The processors' and function stores' Dagster resources: a dagger file that leaves out an enrichment's
service runs under Dagster against a real HTTP API and the session's PostgreSQL, named and logged in to by
the resources (the credentials planted as EnvVars, checked by the servers, and found nowhere in the run's
events); a service named nowhere stops the run before it starts, naming the key and the resource; and the
overlay rules of every processor resource."""

from __future__ import annotations

import pickle
import re
import uuid
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, DagsterInstance, EnvVar, materialize
from dagster_shared.serdes import serialize_value
from psycopg import sql

from dagger_assets.definitions import build_definitions
from dagger_assets.stages import DETERMINISTIC, FAILURE_KIND_TAG
from jobs.metrics.resource import MetricsResource
from jobs.model.spec import DaggerConfigError, parse_dagger
from jobs.processors.enrichment.resource import HttpEnrichmentResource, PostgresEnrichmentResource
from jobs.processors.plugin import PluginError
from jobs.processors.plugin.resource import PluginTransformerResource
from jobs.project import PROJECT_ROOT
from jobs.udfs.resource import DartStoreResource, PythonUdfsResource
from resources import (
    PROCESSOR_RESOURCES,
    SparkResource,
    component_resource_classes,
    default_resources,
    processor_resource_classes,
)
from resources.components import configure_dagger
from tests.conftest import order_payloads
from tests.dagster_deployment import write_orders_dagger
from tests.test_dagster_definitions import _logged_rows
from tests.test_enrichment_http_es import Api, Request

PLANTED = f"planted-{uuid.uuid4().hex[:12]}"
ORDER_ID = {"output_field": "order_id", "type": "sql", "value": "order_id"}


def _resources(**overrides) -> dict:
    return {**default_resources(), "spark": SparkResource(master="local[2]"), **overrides}


def _enrichment_dagger(tmp_path: Path, kafka, descriptor_set: Path, name: str, post: dict) -> Path:
    return write_orders_dagger(
        tmp_path, name, kafka.bootstrap_servers, descriptor_set, {"topics": [kafka.new_topic(name)]},
        sql="SELECT order_id FROM orders", post_processors=post,
    )  # fmt: skip


def _materialize(tmp_path: Path, name: str, resources: dict, instance: DagsterInstance):
    key = name.replace("-", "_")
    return materialize(
        [build_definitions(tmp_path).get_assets_def(AssetKey([key, "sql"]))],
        resources=resources,
        run_config={"ops": {f"{key}_query": {"config": {"bounded": True}}}},
        instance=instance,
        raise_on_error=False,
    )


def _recorded(instance: DagsterInstance, run_id: str) -> list[str]:
    """Everything Dagster stored about the run: its events and the run (config and tags)."""
    texts = [serialize_value(entry) for entry in instance.all_logs(run_id)]
    return [*texts, serialize_value(instance.get_run_by_id(run_id))]


def _failure(result) -> str:
    [failure] = [event for event in result.all_events if event.is_step_failure]
    return failure.step_failure_data.error.cause.message


# --------------------------------------------------------------------------------------------------------
# Under Dagster, on real servers
# --------------------------------------------------------------------------------------------------------


def test_the_http_enrichment_resource_names_the_api_and_authorizes_the_calls(
    tmp_path: Path, kafka, registry, descriptor_set, spark, monkeypatch
):
    def respond(request: Request) -> tuple[int, dict]:
        if request.headers.get("authorization") != f"Bearer {PLANTED}":
            return 401, {"error": "who are you"}
        return 200, {"tier": f"tier-{request.segments[-1]}", "caller": request.headers.get("x-caller")}

    api = Api(respond)
    try:
        path = _enrichment_dagger(
            tmp_path, kafka, descriptor_set, "http-from-resource",
            {
                "http": [{
                    "request_pattern": "/%s", "request_variables": ["order_id"],
                    "headers": {"X-Caller": "dagger-file"},  # wins over the resource's
                    "fail_on_errors": True,
                    "output_mapping": {"tier": "$.tier", "caller": "$.caller"},
                }],
                "internal": [ORDER_ID],
            },
        )  # fmt: skip
        document = yaml.safe_load(path.read_text())
        kafka.produce(document["streams"][0]["topics"][0], order_payloads(registry, 0, 3))
        assert "endpoint" not in document["post_processors"]["http"][0]
        resource = HttpEnrichmentResource(
            endpoint=f"{api.url}/orders",
            headers={"Authorization": EnvVar("DAGGER_TEST_API_BEARER"), "X-Caller": "house"},
            stream_timeout="5s",
        )
        monkeypatch.setenv("DAGGER_TEST_API_BEARER", f"Bearer {PLANTED}")
        instance = DagsterInstance.ephemeral()
        result = _materialize(tmp_path, "http-from-resource", _resources(http_enrichment=resource), instance)

        assert result.success
        rows = sorted(_logged_rows(instance, result.run_id), key=lambda row: row["order_id"])
        assert rows == [
            {"tier": f"tier-o{index}", "caller": "dagger-file", "order_id": f"o{index}"} for index in range(3)
        ]
        assert sorted(api.paths()) == ["/orders/o0", "/orders/o1", "/orders/o2"]
        assert not [text for text in _recorded(instance, result.run_id) if PLANTED in text]
    finally:
        api.close()


@pytest.fixture
def planted_login(postgres):
    """A role whose password is PLANTED, allowed to read one table of order names."""
    role, table = f"resource_{uuid.uuid4().hex[:8]}", f"names_{uuid.uuid4().hex[:8]}"
    with postgres.connect() as connection:
        connection.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(role), sql.Literal(PLANTED))
        )
        connection.execute(
            sql.SQL("CREATE TABLE {} (order_id text PRIMARY KEY, name text)").format(sql.Identifier(table))
        )
        connection.execute(
            sql.SQL("INSERT INTO {} VALUES ('o0', 'Ada'), ('o1', 'Bob'), ('o2', 'Cy')").format(
                sql.Identifier(table)
            )
        )
        connection.execute(
            sql.SQL("GRANT SELECT ON {} TO {}").format(sql.Identifier(table), sql.Identifier(role))
        )
    yield role, table
    with postgres.connect() as connection:
        connection.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(table)))
        connection.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        connection.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))  # fmt: skip


def test_the_postgres_enrichment_resource_names_the_database_and_logs_in(
    tmp_path: Path, kafka, registry, descriptor_set, spark, postgres, planted_login, monkeypatch
):
    role, table = planted_login
    monkeypatch.setenv("DAGGER_TEST_PG_PASSWORD", PLANTED)
    path = _enrichment_dagger(
        tmp_path, kafka, descriptor_set, "pg-from-resource",
        {
            "postgres": [{
                "query_pattern": f"SELECT name FROM {table} WHERE order_id = %s",
                "query_variables": ["order_id"],
                "fail_on_errors": True,
                "output_mapping": {"name": "name"},
            }],
            "internal": [ORDER_ID],
        },
    )  # fmt: skip
    document = yaml.safe_load(path.read_text())
    kafka.produce(document["streams"][0]["topics"][0], order_payloads(registry, 0, 3))
    assert not {"host", "port", "user", "password", "database"} & set(
        document["post_processors"]["postgres"][0]
    )
    resource = PostgresEnrichmentResource(
        host=postgres.host,
        port=postgres.port,
        user=role,
        password=EnvVar("DAGGER_TEST_PG_PASSWORD"),
        database=postgres.database,
        idle_timeout="10s",
    )
    instance = DagsterInstance.ephemeral()
    result = _materialize(tmp_path, "pg-from-resource", _resources(postgres_enrichment=resource), instance)

    assert result.success, _failure(result)
    rows = sorted(_logged_rows(instance, result.run_id), key=lambda row: row["order_id"])
    assert rows == [
        {"name": name, "order_id": f"o{index}"} for index, name in enumerate(["Ada", "Bob", "Cy"])
    ]
    assert not [text for text in _recorded(instance, result.run_id) if PLANTED in text]


@pytest.mark.parametrize(
    "kind, enrichment, missing",
    [
        ("http", {"request_pattern": "/%s", "request_variables": ["order_id"]}, "endpoint is not set"),
        (
            "postgres",
            {
                "port": 5432,
                "password": "x",
                "query_pattern": "SELECT 1 WHERE %s",
                "query_variables": ["order_id"],
            },
            "host, user, database are not set",
        ),
    ],
)
def test_a_service_named_neither_in_the_file_nor_by_the_resource_stops_the_run_naming_both(
    tmp_path: Path, kafka, descriptor_set, spark, kind, enrichment, missing
):
    name = f"no-{kind}-service"
    post = {kind: [{**enrichment, "output_mapping": {"out": "$.out" if kind == "http" else "out"}}]}
    _enrichment_dagger(tmp_path, kafka, descriptor_set, name, post)
    instance = DagsterInstance.ephemeral()
    result = _materialize(tmp_path, name, _resources(), instance)

    assert not result.success
    message = _failure(result)
    assert f"post_processors.{kind}[0]: {missing}" in message
    assert f"{kind}_enrichment resource" in message and f"{kind}_enrichment" in PROCESSOR_RESOURCES
    assert instance.get_run_by_id(result.run_id).tags.get(FAILURE_KIND_TAG) == DETERMINISTIC


# --------------------------------------------------------------------------------------------------------
# The overlay rules
# --------------------------------------------------------------------------------------------------------


def _spec(**fields) -> object:
    document = {
        "name": "overlay",
        "schema_registry": {"descriptor_sets": ["x.desc"]},
        "streams": [{"kind": "parquet", "table": "t", "proto_message": "m", "event_time_field": "e",
                     "paths": ["p"], "pre_processors": fields.pop("pre_processors", [])}],
        "sql": "SELECT 1",
        "sinks": [{"kind": "log"}],
        **fields,
    }  # fmt: skip
    return parse_dagger(document)


def _configure(spec, *resources):
    defaults = default_resources()
    return configure_dagger(spec, defaults["schema_registry"], {}, {}, resources)


def test_each_processor_resource_only_sets_keys_its_model_has():
    for key, resource_class in processor_resource_classes().items():
        fields = set(resource_class.model_fields)
        assert fields <= set(resource_class.configures.model_fields), (key, fields)
        assert all(field.description for field in resource_class.model_fields.values()), key
        assert component_resource_classes()[key] is resource_class
        assert isinstance(default_resources()[key], resource_class)


def test_the_plugin_resource_applies_to_pre_and_post_processor_plugins_the_step_winning():
    plugin = {"kind": "plugin", "command": ["node", "p.mjs"]}
    spec = _spec(
        pre_processors=[{**plugin, "environment": {"MODE": "stream"}}],
        post_processors={"transformers": [{**plugin, "timeout": "5s"}]},
    )
    resource = PluginTransformerResource(
        environment={"MODE": "house", "TOKEN": "t"}, timeout="1m", batch_size=7
    )
    configured = _configure(spec, resource)
    pre, post = configured.streams[0].pre_processors[0], configured.post_processors.transformers[0]
    assert pre.environment == {"MODE": "stream", "TOKEN": "t"}
    assert (pre.timeout.total_seconds(), pre.batch_size) == (60, 7)
    assert post.environment == {"MODE": "house", "TOKEN": "t"}
    assert (post.timeout.total_seconds(), post.batch_size) == (5, 7)


def test_the_dart_store_resource_gives_a_store_to_a_dagger_file_without_one(tmp_path: Path):
    store = DartStoreResource(location=str(tmp_path), fetch_headers={"Authorization": "t"})
    assert _configure(_spec(), store).functions.darts.location == str(tmp_path)
    own = _spec(functions={"darts": {"location": "gs://own", "fetch_headers": {"X": "y"}}})
    darts = _configure(own, store).functions.darts
    assert (darts.location, darts.fetch_headers) == ("gs://own", {"Authorization": "t", "X": "y"})
    assert _configure(_spec(), DartStoreResource(fetch_timeout="3s")).functions.darts is None


def test_the_python_udfs_resource_puts_the_house_library_before_the_files_own():
    spec = _spec(functions={"python_udfs": {"files": ["/own.py", "/shared.zip"], "arrow_batch_size": 5}})
    house = PythonUdfsResource(
        files=["/shared.zip", "/house.zip"], modules=["house.udfs"], arrow_batch_size=50
    )
    udfs = _configure(spec, house).functions.python_udfs
    assert udfs.files == ["/shared.zip", "/house.zip", "/own.py"]
    assert (udfs.modules, udfs.arrow_batch_size) == (["house.udfs"], 5)
    assert _configure(_spec(), house).functions.python_udfs.arrow_batch_size == 50


def test_a_resource_value_that_does_not_fit_is_a_config_error_naming_the_component_and_resource():
    spec = _spec(post_processors={"http": [{"request_pattern": "/%s", "request_variables": ["a"],
                                            "output_mapping": {"o": "$.o"}}]})  # fmt: skip
    with pytest.raises(DaggerConfigError) as error:
        _configure(spec, HttpEnrichmentResource(endpoint="ftp://api"))
    message = str(error.value)
    assert "post_processors.http[0] with the defaults of HttpEnrichmentResource" in message
    assert re.search(r"endpoint: expected an http:// or https:// URL", message)
    # The placeholders of a resource's endpoint are checked against the file's variables once it is in.
    with pytest.raises(DaggerConfigError, match="'endpoint' has 1 %s placeholder"):
        _configure(spec, HttpEnrichmentResource(endpoint="http://api/%s"))


def test_every_component_resource_is_documented_by_a_reference_marker():
    pages = "\n".join(page.read_text() for page in (PROJECT_ROOT / "docs").rglob("*.md"))
    missing = [
        f"{cls.__module__}:{cls.__name__}"
        for cls in component_resource_classes().values()
        if f"<!-- config-reference: {cls.__module__}:{cls.__name__} -->" not in pages
    ]
    assert not missing


def test_plugin_errors_keep_their_public_name_after_the_split():
    """Users see `jobs.processors.plugin.PluginError: ...` in a failed run; pickle finds it there too."""
    assert f"{PluginError.__module__}.{PluginError.__qualname__}" == "jobs.processors.plugin.PluginError"
    error = pickle.loads(pickle.dumps(PluginError("plugin x (post_processors.transformers[0]): boom")))
    assert type(error) is PluginError


def test_secrets_in_a_resources_mappings_are_shown_by_variable_name_only(monkeypatch):
    """What the Dagster UI shows of a resource's configuration: an EnvVar in a mapping by its name."""
    monkeypatch.setenv("DAGGER_TEST_HEADER_TOKEN", PLANTED)
    resource = HttpEnrichmentResource(headers={"Authorization": EnvVar("DAGGER_TEST_HEADER_TOKEN")})
    shown = resource.get_resource_definition().config_schema.as_field().default_value
    assert shown["headers"] == {"Authorization": {"env": "DAGGER_TEST_HEADER_TOKEN"}}
    assert PLANTED not in repr(shown)


def test_the_metrics_resource_gives_every_dagger_its_endpoint_and_daemon_the_file_winning():
    resource = MetricsResource(prometheus_port=9464, statsd_host="statsd.internal", statsd_prefix="house")
    plain = _configure(_spec(), resource).metrics
    assert (plain.prometheus_port, plain.statsd_host, plain.statsd_port, plain.statsd_prefix) == (
        9464, "statsd.internal", 8125, "house",
    )  # fmt: skip
    own = _configure(_spec(metrics={"prometheus_port": 9500, "statsd_prefix": ""}), resource).metrics
    assert (own.prometheus_port, own.statsd_host, own.statsd_prefix) == (9500, "statsd.internal", "")
