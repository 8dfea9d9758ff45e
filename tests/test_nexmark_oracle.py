"""Nexmark (issue 49), as Flink runs it: every query on Apache Flink 2.3 and as a dagger, over the same
generated events in one Apache Kafka topic, the same rows out.

The generator (`jobs.tools.nexmark`) writes 3,000 events, 100 a second of event time (30 s: three
10-second windows, sessions and joins across them), into a topic of the session's Apache Kafka. Flink runs
the queries that run as daggers in one PyFlink process, started once for the module, reading the topic
through its Kafka SQL connector to the end with its final watermark. Each dagger is the project's query
files (`jobs/tools/nexmark/queries`) as a script, run bounded through its Kafka source in the tests' Spark
session, in three micro-batches (one batch would hide state an operator drops between batches), its sink
swapped for a log sink whose rows are kept (`jobs/tools/nexmark/oracle.py`). Rows are compared as
multisets, with their column names and each value's type; an updating query as its final table. q14's
`count_char` is the project's own Flink ScalarFunction of Nexmark's class name, in a jar both engines are
given, with Flink's API jars for the dagger.

`STATUS` is the one table of what each query does today: `matches` (Flink's rows, to the row),
`clock-free` (q12: processing time, compared on what the wall clock does not decide), `matches its model`
(a query Flink cannot run, q6: the rows of a model this file computes from the generated events). Every
query runs; docs/nexmark.md shows the same table.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from jobs.project import BUILD_DIR
from jobs.tools.nexmark.config import NexmarkConfig
from jobs.tools.nexmark.events import Auction, Bid
from jobs.tools.nexmark.generator import NexmarkGenerator
from jobs.tools.nexmark.oracle import (
    QUERY_IDS,
    UPSERT_KEYS,
    FlinkNexmark,
    NexmarkScripts,
    batch_size,
    comparable,
    dagger_rows,
    flink_rows,
    generate,
)
from tests.test_flink_script_functions import COUNT_CHARACTERS, test_jar

# The module takes minutes (Flink runs every query, then each runs as a dagger): `make test` hands it
# out among the first files (tests/conftest.py).
pytestmark = pytest.mark.slow

EVENTS = NexmarkConfig(
    num_events=3000, first_event_rate=100, next_event_rate=100, repeat_bidder_id_offset=False
)
"""Beam's bidder ids (Nexmark's rule once): with nexmark-flink's, bidders run 1000 above the persons made, so
at this scale no bid's bidder is a person and q23's join has no rows."""

COUNT_CHAR = "com.github.nexmark.flink.udf.CountChar"
"""q14's `count_char`, under the class name Nexmark's script declares: the project's own Flink
ScalarFunction (`jvm/src/test/java`), packed into a jar both engines are given."""
FLINK_API_JARS = BUILD_DIR / "jvm" / "flink-api"
"""Flink's flink-table-common and flink-core (Maven copies them there): the dagger loads a ScalarFunction
with them among its jars, as a user would give them."""

MATCHES = "matches"
CLOCK_FREE = "clock-free"
"""A processing-time query (q12), whose windows are the wall clock's on each engine: compared on what the
clock does not decide (`test_a_processing_time_query_agrees_with_flink_where_the_clock_does_not_decide`)."""
MATCHES_MODEL = "matches its model"
"""A query Flink cannot run (q6): compared with a model this file computes from the generated events."""
STATUS: dict[str, str] = {
    "q0": MATCHES,
    "q1": MATCHES,
    "q2": MATCHES,
    "q3": MATCHES,
    "q4": MATCHES,
    "q5": MATCHES,
    "q6": MATCHES_MODEL,
    "q7": MATCHES,
    "q8": MATCHES,
    "q9": MATCHES,
    "q10": MATCHES,
    "q11": MATCHES,
    "q12": CLOCK_FREE,
    "q13": MATCHES,
    "q14": MATCHES,
    "q15": MATCHES,
    "q16": MATCHES,
    "q17": MATCHES,
    "q18": MATCHES,
    "q19": MATCHES,
    "q20": MATCHES,
    "q21": MATCHES,
    "q22": MATCHES,
    "q23": MATCHES,
}
"""Each query's status: how it is compared."""

RUNNING = [query for query in QUERY_IDS if STATUS[query] != MATCHES_MODEL]
"""The queries Flink runs for the module."""


@pytest.fixture(scope="module")
def scripts(kafka, tmp_path_factory: pytest.TempPathFactory) -> NexmarkScripts:
    """The queries' scripts over a topic of the generator's events."""
    topic = f"nexmark-{kafka.new_topic('unused').rsplit('-', 1)[-1]}"
    assert generate(kafka.bootstrap_servers, topic, EVENTS) == EVENTS.num_events
    folder = tmp_path_factory.mktemp("nexmark")
    functions = test_jar(folder, COUNT_CHAR, COUNT_CHARACTERS)
    flink_api = sorted(FLINK_API_JARS.glob("*.jar"))
    assert len(flink_api) == 2, f"no Flink API jars in {FLINK_API_JARS}: the JVM module's build puts them"
    return NexmarkScripts(
        kafka.bootstrap_servers,
        topic,
        folder,
        function_jars=(functions, *flink_api),
        max_records_per_batch=batch_size(EVENTS.num_events),  # three micro-batches, as a dagger runs
    )


@pytest.fixture(scope="module")
def flink(scripts: NexmarkScripts) -> Iterator[FlinkNexmark]:
    """The running queries on Flink, one process for all, started at once."""
    oracle = FlinkNexmark(scripts, RUNNING)
    try:
        yield oracle
    finally:
        oracle.stop()


def test_every_query_has_one_status() -> None:
    assert list(STATUS) == list(QUERY_IDS)
    assert set(STATUS.values()) <= {MATCHES, CLOCK_FREE, MATCHES_MODEL}


@pytest.mark.parametrize("query", [query for query in QUERY_IDS if STATUS[query] == MATCHES])
def test_the_dagger_gives_flinks_rows(
    query: str, scripts: NexmarkScripts, flink: FlinkNexmark, spark
) -> None:
    ours = dagger_rows(spark, scripts.dagger(query), UPSERT_KEYS.get(query, ()))  # while Flink runs
    theirs = flink_rows(flink.result(query), UPSERT_KEYS.get(query, ()))
    assert "error" not in theirs, f"Flink could not run {query}: {theirs['error']}"
    assert "error" not in ours, ours["error"]
    assert theirs["rows"], f"{query} compares nothing: Flink gave no rows"
    assert ours["columns"] == theirs["columns"]
    assert ours["rows"] == theirs["rows"]


Q12_WINDOW = timedelta(seconds=10)


def _bids_by_bidder() -> Counter[int]:
    """The input's bids per bidder, from the generator (the topic holds the same events)."""
    events = NexmarkGenerator(EVENTS).events()
    return Counter(event.payload.bidder for event in events if isinstance(event.payload, Bid))


def _counted_in_closed_windows(result: dict[str, Any], bids: Counter[int]) -> Counter[int]:
    """Each bidder's bids over the windows of q12's `result`, checked first for what holds on any clock:
    one row per bidder and window, every window ten seconds of the wall clock, aligned on ten seconds."""
    counted: Counter[int] = Counter()
    windows = Counter()
    for (_, bidder), (_, count), (_, start), (_, end) in result["rows"]:
        starts, ends = datetime.fromisoformat(start), datetime.fromisoformat(end)
        assert ends - starts == Q12_WINDOW, start
        assert (starts - datetime(1970, 1, 1)) % Q12_WINDOW == timedelta(), start
        assert count >= 1
        windows[(bidder, start)] += 1
        counted[bidder] += count
    assert set(windows.values()) <= {1}
    assert set(counted) <= set(bids)
    return counted


@pytest.mark.parametrize("query", [query for query in QUERY_IDS if STATUS[query] == CLOCK_FREE])
def test_a_processing_time_query_agrees_with_flink_where_the_clock_does_not_decide(
    query: str, scripts: NexmarkScripts, flink: FlinkNexmark, spark
) -> None:
    """q12's rows are each engine's wall clock's: which window a bid falls in, and whether a window had
    closed when the bounded input ended (Flink 2.3 drops the windows still open then, and so does the
    dagger). What the clock does not decide must agree: the columns and their types, one row per bidder
    and aligned ten-second window, and no bid counted twice or out of nowhere (each bidder's total at most
    its bids in the input, all of them where every window closed)."""
    ours = dagger_rows(spark, scripts.dagger(query))
    theirs = flink_rows(flink.result(query))
    assert "error" not in theirs, f"Flink could not run {query}: {theirs['error']}"
    assert "error" not in ours, ours["error"]
    assert ours["columns"] == theirs["columns"]
    types = {tuple(tag for tag, _ in row) for row in [*ours["rows"], *theirs["rows"]]}
    assert types <= {("int64", "int64", "ts", "ts")}
    bids = _bids_by_bidder()
    for counted in (_counted_in_closed_windows(ours, bids), _counted_in_closed_windows(theirs, bids)):
        assert all(counted[bidder] <= bids[bidder] for bidder in counted)


def q6_model(config: NexmarkConfig) -> dict:
    """q6's final table from the events, in plain Python: each auction's winning bid (its highest among the
    bids of its lifetime, from its start to its expiry), and per seller, in the order of the winning bids'
    times (then the auction ids), each winner's row with the average (BIGINT, truncated) of its price and the
    10 winners' before it."""
    auctions: list[Auction] = []
    bids: dict[int, list[Bid]] = defaultdict(list)
    for event in NexmarkGenerator(config).events():
        if isinstance(event.payload, Auction):
            auctions.append(event.payload)
        elif isinstance(event.payload, Bid):
            bids[event.payload.auction].append(event.payload)
    winners: dict[int, list[tuple[int, int, int]]] = defaultdict(list)  # seller: (time, auction, price)
    for auction in auctions:
        lived = [
            bid for bid in bids[auction.id] if auction.date_time_ms <= bid.date_time_ms <= auction.expires_ms
        ]
        if not lived:
            continue
        best = max(bid.price for bid in lived)
        times = {bid.date_time_ms for bid in lived if bid.price == best}
        assert len(times) == 1, (
            f"auction {auction.id}'s winner is a tie of times {times}: the model is ambiguous"
        )
        winners[auction.seller].append((times.pop(), auction.id, best))
    rows = []
    for seller, won in winners.items():
        prices = [price for _, _, price in sorted(won)]
        for index in range(len(prices)):
            frame = prices[max(0, index - 10) : index + 1]
            rows.append([["str", str(seller)], ["int64", sum(frame) // len(frame)]])
    return comparable(["seller", "avg_price"], rows)


def test_q6_which_flink_cannot_run_gives_its_models_rows(scripts: NexmarkScripts, spark) -> None:
    expected = q6_model(EVENTS)
    assert len(expected["rows"]) > 11, "no seller has more than 10 winners to average: the model tests little"
    assert dagger_rows(spark, scripts.dagger("q6")) == expected
