"""The decisive Elasticsearch tests again, on Elasticsearch 7.17: bulk writes into indices whose mappings
come from the index template the sink puts in place, a mapping the sink extends and one it cannot change,
per-document rejections and the error they carry, and the enrichment's lookups by id.

They are the tests of `test_sink_elasticsearch.py` and `test_enrichment_http_es.py`, imported here, where
`elasticsearch` is a 7.17 server that runs only while this file's tests do (the other files run on 8.15).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.servers.elasticsearch import VERSION_7, ElasticsearchServer, start_server
from tests.test_enrichment_http_es import (  # noqa: F401 - fixtures and tests collected here again
    api_server,
    customer_index,
    test_elasticsearch_looks_documents_up_by_id_with_failover_and_basic_auth,
)
from tests.test_sink_elasticsearch import (  # noqa: F401 - tests collected here again
    test_a_date_pattern_index_gets_its_mappings_through_an_index_template,
    test_an_existing_index_gets_the_fields_it_lacks_and_a_conflict_stops_the_start,
    test_rejected_documents_fail_the_batch_naming_index_id_and_reason,
)


@pytest.fixture(scope="module")
def elasticsearch() -> Iterator[ElasticsearchServer]:
    server = start_server(VERSION_7)
    assert server.ok("GET", "/")["version"]["number"] == VERSION_7
    try:
        yield server
    finally:
        server.stop()
