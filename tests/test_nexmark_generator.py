"""The Nexmark generator (`jobs.tools.nexmark`) against Nexmark's rules (github.com/nexmark/nexmark,
nexmark-flink's generator): kinds, ids, references, hot keys, sizes, times, its Kafka and Parquet output."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from jobs.tools.nexmark.__main__ import main
from jobs.tools.nexmark.channels import HOT_CHANNELS, _reversed_int32_magnitude, channels
from jobs.tools.nexmark.config import NexmarkConfig
from jobs.tools.nexmark.events import (
    Auction,
    Bid,
    EventType,
    GeneratedEvent,
    Payload,
    Person,
    nexmark_byte_size,
)
from jobs.tools.nexmark.generator import FIRST_NAMES, LAST_NAMES, US_CITIES, US_STATES, NexmarkGenerator
from jobs.tools.nexmark.kafka_writer import KafkaEventWriter
from jobs.tools.nexmark.layout import flink_sql_timestamp, json_record
from jobs.tools.nexmark.parquet_writer import ParquetEventWriter
from jobs.tools.nexmark.values import padding_source

BASE_MS = 1_436_918_400_000  # 2015-07-15T00:00:00Z
BEAM_ORIGIN = {"first_event_id": 0, "first_event_number": 0, "repeat_bidder_id_offset": False}
"""Nexmark's generator started at event 0 with the bidder offset added once (its Beam original)."""

DDL_COLUMNS = {
    "person": ["id", "name", "emailAddress", "creditCard", "city", "state", "dateTime", "extra"],
    "auction": [
        "id",
        "itemName",
        "description",
        "initialBid",
        "reserve",
        "dateTime",
        "expires",
        "seller",
        "category",
        "extra",
    ],
    "bid": ["auction", "bidder", "price", "channel", "url", "dateTime", "extra"],
}
"""The nested columns of Nexmark's `ddl_kafka.sql`, in its order."""

FLINK_SQL_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$")


def generate(count: int, **fields: object) -> list[GeneratedEvent]:
    return list(NexmarkGenerator(NexmarkConfig(num_events=count, **fields)).events())


def payloads_of(events: list[GeneratedEvent], kind: type) -> list:
    return [event.payload for event in events if isinstance(event.payload, kind)]


@pytest.fixture(scope="module")
def default_events() -> list[GeneratedEvent]:
    return generate(5_000)


@pytest.fixture(scope="module")
def beam_events() -> list[GeneratedEvent]:
    return generate(5_000, **BEAM_ORIGIN)


def test_defaults_are_nexmarks():
    config = NexmarkConfig()
    assert (config.person_proportion, config.auction_proportion, config.bid_proportion) == (1, 3, 46)
    assert (config.avg_person_byte_size, config.avg_auction_byte_size, config.avg_bid_byte_size) == (
        200,
        500,
        100,
    )
    assert (config.hot_auction_ratio, config.hot_sellers_ratio, config.hot_bidders_ratio) == (2, 4, 4)
    assert (config.num_in_flight_auctions, config.num_active_people) == (100, 1_000)
    assert (config.first_event_rate, config.next_event_rate, config.out_of_order_group_size) == (
        10_000,
        10_000,
        1,
    )
    assert (config.occasional_delay_sec, config.prob_delayed_event) == (3, 0.1)
    assert config.base_time_ms == BASE_MS


def test_config_is_strict():
    with pytest.raises(ValidationError, match="next_event_rate must equal first_event_rate"):
        NexmarkConfig(next_event_rate=5_000)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        NexmarkConfig.model_validate({"hot_auctions_ratio": 3})


def test_nexmark_flinks_first_events(default_events):
    """Its `nexmark` connector starts at event id 1 + number 1: two auctions, 46 bids, then a person."""
    first = default_events[:52]
    assert [event.event_id for event in first] == list(range(2, 54))
    assert [event.event_type for event in first] == (
        [EventType.AUCTION] * 2 + [EventType.BID] * 46 + [EventType.PERSON] + [EventType.AUCTION] * 3
    )
    assert [auction.id for auction in payloads_of(first, Auction)] == [1001, 1002, 1003, 1004, 1005]
    assert [person.id for person in payloads_of(first, Person)] == [1001]
    # Event number n + 1 at n + 1 tenths of a millisecond, truncated: 9 events in the first millisecond.
    assert [event.event_time_ms - BASE_MS for event in default_events[:21]] == [0] * 9 + [1] * 10 + [2] * 2
    made_ids = {person.id for person in payloads_of(default_events, Person)}
    assert 1000 not in made_ids and 1000 not in {
        auction.id for auction in payloads_of(default_events, Auction)
    }


def test_beams_origin_starts_with_person_1000(beam_events):
    first = beam_events[:51]
    assert [event.event_type for event in first] == (
        [EventType.PERSON] + [EventType.AUCTION] * 3 + [EventType.BID] * 46 + [EventType.PERSON]
    )
    assert [person.id for person in payloads_of(first, Person)] == [1000, 1001]
    assert [auction.id for auction in payloads_of(first, Auction)] == [1000, 1001, 1002]
    assert [event.event_time_ms - BASE_MS for event in beam_events[:11]] == [0] * 10 + [1]


@pytest.mark.parametrize("origin", [{}, BEAM_ORIGIN], ids=["nexmark-flink", "beam"])
def test_proportions_are_exact_over_whole_epochs(origin):
    for epochs in (1, 7, 40):
        counts = Counter(event.event_type for event in generate(50 * epochs, **origin))
        assert counts == {EventType.PERSON: epochs, EventType.AUCTION: 3 * epochs, EventType.BID: 46 * epochs}
    counts = Counter(
        event.event_type
        for event in generate(20 * 5, person_proportion=2, auction_proportion=5, bid_proportion=13, **origin)
    )
    assert counts == {EventType.PERSON: 10, EventType.AUCTION: 25, EventType.BID: 65}


def test_same_seed_same_bytes_other_seed_other_values():
    def records(seed: int) -> list[bytes]:
        return [json_record(event.payload) for event in generate(2_000, seed=seed)]

    assert records(7) == records(7)
    assert records(7) != records(8)
    # A seed changes the drawn fields, never the kinds, the ids made or the times.
    skeleton = [
        (event.event_id, event.event_time_ms, getattr(event.payload, "id", None))
        for event in generate(2_000, seed=7)
    ]
    assert skeleton == [
        (event.event_id, event.event_time_ms, getattr(event.payload, "id", None))
        for event in generate(2_000, seed=8)
    ]


def _with_newest(events: list[GeneratedEvent]) -> Iterator[tuple[Payload, int, int]]:
    """Each payload with the newest person and auction ids by then (by Nexmark's rules 1000 before any:
    nexmark-flink's first auctions come before its first person)."""
    newest_person = newest_auction = 1000
    for event in events:
        if isinstance(event.payload, Person):
            newest_person = event.payload.id
        elif isinstance(event.payload, Auction):
            newest_auction = event.payload.id
        yield event.payload, newest_person, newest_auction


def _references(events: list[GeneratedEvent], bidder_offset: int):
    """(reference - newest id so far) for each auction's seller, bid's auction and bid's bidder."""
    sellers, auctions, bidders = [], [], []
    for payload, newest_person, newest_auction in _with_newest(events):
        if isinstance(payload, Auction):
            sellers.append(payload.seller - newest_person)
        elif isinstance(payload, Bid):
            auctions.append(payload.auction - newest_auction)
            bidders.append(payload.bidder - bidder_offset - newest_person)
    return sellers, auctions, bidders


def test_references_name_made_ids_or_at_most_ten_ahead(beam_events):
    """Nexmark does not promise a referenced person or auction exists yet: a cold pick may name one of the
    next 10 ids (its 'lead'). Hot picks and most cold ones name ids already made."""
    sellers, auctions, bidders = _references(beam_events, bidder_offset=0)
    for ahead in (sellers, auctions, bidders):
        assert max(ahead) <= 10
        assert 0 < sum(1 for step in ahead if step > 0) / len(ahead) < 0.1
    # A bid's auction is one of the 100 in flight before the newest, or ahead.
    assert min(auctions) >= -100
    assert min(sellers) >= -1_000 and min(bidders) >= -1_000  # among the 1,000 active people


def test_nexmark_flink_bidders_are_a_thousand_ahead(default_events):
    """nexmark-flink adds the first person id to a bidder twice: bidders run 1000 above Nexmark's pick, and
    early bids name the never-made auction 1000 (the hot auction of the first block)."""
    sellers, auctions, bidders = _references(default_events, bidder_offset=1000)
    assert max(sellers) <= 10 and max(auctions) <= 10 and max(bidders) <= 10
    first_bids = payloads_of(default_events[:48], Bid)
    assert Counter(bid.auction for bid in first_bids).most_common(1)[0][0] == 1000
    assert min(bid.bidder for bid in payloads_of(default_events, Bid)) >= 2000


def _hot_share(events: list[GeneratedEvent]) -> tuple[float, float, float]:
    """Shares of auctions by the block's hot seller and of bids on the hot auction and by the hot bidder."""
    hot_sellers = hot_auctions = hot_bidders = 0
    for payload, newest_person, newest_auction in _with_newest(events):
        if isinstance(payload, Auction):
            hot_sellers += payload.seller == (newest_person - 1000) // 100 * 100 + 1000
        elif isinstance(payload, Bid):
            hot_auctions += payload.auction == (newest_auction - 1000) // 100 * 100 + 1000
            hot_bidders += payload.bidder == (newest_person - 1000) // 100 * 100 + 1001
    auctions, bids = len(payloads_of(events, Auction)), len(payloads_of(events, Bid))
    return hot_sellers / auctions, hot_auctions / bids, hot_bidders / bids


def test_hot_keys_take_their_share(beam_events):
    sellers, auctions, bidders = _hot_share(beam_events)
    assert 0.70 < sellers < 0.85  # 3 in 4, plus cold picks of the same person
    assert 0.47 < auctions < 0.58  # 1 in 2
    assert 0.72 < bidders < 0.82  # 3 in 4
    top_auctions = Counter(bid.auction for bid in payloads_of(beam_events, Bid)).most_common(3)
    assert {auction for auction, _ in top_auctions} == {1000, 1100, 1200}
    flat = generate(5_000, hot_auction_ratio=1, hot_sellers_ratio=1, hot_bidders_ratio=1, **BEAM_ORIGIN)
    assert all(share < 0.1 for share in _hot_share(flat))


def _assert_sizes_average(events: list[GeneratedEvent], kind: type, average: int) -> None:
    """Each record is within 20% of the average (the padding is uniform over 20% either side of what the
    other fields leave), and the mean is within 4 standard errors of that uniform of the average."""
    sizes = [nexmark_byte_size(payload) for payload in payloads_of(events, kind)]
    assert all(abs(size - average) <= 0.2 * average for size in sizes), kind
    standard_error = 0.2 * average / math.sqrt(3) / math.sqrt(len(sizes))
    assert abs(sum(sizes) / len(sizes) - average) < 4 * standard_error + 1, kind


def test_average_sizes_are_the_configured_ones(default_events):
    for kind, average in ((Person, 200), (Auction, 500), (Bid, 100)):
        _assert_sizes_average(default_events, kind, average)
    bigger = generate(2_000, avg_person_byte_size=1_000, avg_auction_byte_size=2_000, avg_bid_byte_size=300)
    for kind, average in ((Person, 1_000), (Auction, 2_000), (Bid, 300)):
        _assert_sizes_average(bigger, kind, average)


def test_fields_come_from_nexmarks_lists_and_ranges(default_events):
    for person in payloads_of(default_events, Person):
        first_name, last_name = person.name.split(" ")
        assert first_name in FIRST_NAMES and last_name in LAST_NAMES
        assert person.city in US_CITIES and person.state in US_STATES
        assert re.fullmatch(r"\d{4} \d{4} \d{4} \d{4}", person.credit_card)
        assert re.fullmatch(r"[a-z ]{0,6}@[a-z ]{0,4}\.com", person.email_address)
    for auction in payloads_of(default_events, Auction):
        assert 10 <= auction.category <= 14
        assert 100 <= auction.initial_bid <= 100_000_000 and auction.reserve > auction.initial_bid
        assert len(auction.item_name) <= 19 and len(auction.description) <= 99
        # Auctions last 1 ms to twice the time 100 in-flight auctions take to be made (1,666 events).
        assert 1 <= auction.expires_ms - auction.date_time_ms <= 334
    bids = payloads_of(default_events, Bid)
    hot = sum(bid.channel in HOT_CHANNELS for bid in bids) / len(bids)
    assert 0.45 < hot < 0.55
    assert all(
        re.fullmatch(r"channel-\d{1,4}", bid.channel) for bid in bids if bid.channel not in HOT_CHANNELS
    )
    assert all(
        re.fullmatch(
            r"https://www\.nexmark\.com/[a-z_]{3,4}/[a-z_]{3,4}/[a-z_]{3,4}/item\.htm\?query=1"
            r"(&channel_id=-?\d+)?",
            bid.url,
        )
        for bid in bids
    )
    assert set(padding_source(0)) <= {chr(code) for code in range(ord("H"), ord("z") + 1)}


def test_numbered_channel_ids_are_javas_reversed_bits():
    assert [_reversed_int32_magnitude(number) for number in (0, 1, 2, 3)] == [
        0,
        -2_147_483_648,  # Java's Math.abs of the smallest int
        1_073_741_824,
        1_073_741_824,
    ]
    table = channels(0)
    with_id = [url for _, url in table.numbered if "&channel_id=" in url]
    assert 0.85 < len(with_id) / len(table.numbered) < 0.95
    assert table.numbered[2][0] == "channel-2"


def test_in_order_event_times_are_monotone_and_exact(default_events):
    times = [event.event_time_ms for event in default_events]
    assert times == sorted(times)
    assert times == [BASE_MS + (1 + number) * 100 // 1000 for number in range(len(times))]
    assert all(event.watermark_ms == event.event_time_ms == event.emit_at_ms for event in default_events)
    fast = generate(100, first_event_rate=1_000_000, next_event_rate=1_000_000)
    assert fast[-1].event_time_ms - BASE_MS == 0  # a microsecond apart: all in the first millisecond


def test_out_of_order_groups_shuffle_within_groups_only():
    size = 100  # 10 ms of events: a group of 10 would share its millisecond
    events = generate(2_000, out_of_order_group_size=size, **BEAM_ORIGIN)
    times = [event.event_time_ms for event in events]
    assert times != sorted(times)
    for start in range(0, len(events), size):
        group = events[start : start + size]
        assert sorted(event.event_id for event in group) == list(range(start, start + size))
        assert all(event.watermark_ms == BASE_MS + start // 10 for event in group)
        assert min(event.event_time_ms for event in events[start:]) >= group[0].watermark_ms


def test_occasional_delays_hold_events_back_without_changing_them():
    in_order = generate(3_000)
    delayed = generate(3_000, delay_events=True)
    assert sorted(json_record(event.payload) for event in delayed) == sorted(
        json_record(event.payload) for event in in_order
    )
    moved = [event for event in delayed if event.emit_at_ms != event.event_time_ms]
    assert 0.07 < len(moved) / len(delayed) < 0.13
    assert all(1 <= event.emit_at_ms - event.event_time_ms <= 3_000 for event in moved)
    due = [event.emit_at_ms for event in delayed]
    assert due == sorted(due)
    assert [event.event_time_ms for event in delayed] != sorted(event.event_time_ms for event in delayed)


def test_json_records_are_nexmarks_kafka_table_rows(default_events):
    for event in default_events[:60]:
        record = json.loads(json_record(event.payload))
        assert list(record) == ["event_type", "person", "auction", "bid"]
        kind = event.event_type.name.lower()
        assert record["event_type"] == int(event.event_type)
        assert [column for column in DDL_COLUMNS if record[column] is not None] == [kind]
        assert list(record[kind]) == DDL_COLUMNS[kind]
        assert FLINK_SQL_TIMESTAMP.match(record[kind]["dateTime"])
        assert record[kind]["dateTime"] == flink_sql_timestamp(event.event_time_ms)
    assert flink_sql_timestamp(BASE_MS + 1_234) == "2015-07-15 00:00:01.234"


def test_kafka_round_trip(kafka):
    events = generate(2_000)
    topic = kafka.new_topic("nexmark")
    writer = KafkaEventWriter(kafka.bootstrap_servers, topic)
    for event in events:
        writer.write(event)
    writer.close()
    records = kafka.read_all(topic)
    assert [record.value() for record in records] == [json_record(event.payload) for event in events]
    assert [record.timestamp()[1] for record in records] == [event.event_time_ms for event in events]
    assert all(record.key() is None for record in records)

    spread = kafka.new_topic("nexmark-spread", partitions=3)
    writer = KafkaEventWriter(kafka.bootstrap_servers, spread)
    for event in events[:30]:
        writer.write(event)
    writer.close()
    by_partition = Counter(record.partition() for record in kafka.read_all(spread))
    assert by_partition == {0: 10, 1: 10, 2: 10}


def test_parquet_round_trip(tmp_path: Path):
    events = generate(2_500)
    writer = ParquetEventWriter(tmp_path / "nexmark", events_per_file=1_000, row_group_size=400)
    for event in events:
        writer.write(event)
    writer.close()
    assert [path.name for path in writer.files] == [
        "part-00000.parquet",
        "part-00001.parquet",
        "part-00002.parquet",
    ]
    assert sorted(path.name for path in (tmp_path / "nexmark").iterdir()) == [
        path.name for path in writer.files
    ]
    table = pq.read_table(tmp_path / "nexmark")
    assert table.column_names == ["event_type", "person", "auction", "bid", "dateTime"]
    rows = table.to_pylist()
    assert len(rows) == len(events)
    for row, event in zip(rows, events, strict=True):
        kind = event.event_type.name.lower()
        assert row["event_type"] == int(event.event_type)
        assert [column for column in DDL_COLUMNS if row[column] is not None] == [kind]
        assert list(row[kind]) == DDL_COLUMNS[kind]
        expected = json.loads(json_record(event.payload))[kind]
        actual = {
            name: flink_sql_timestamp(round(value.timestamp() * 1000))
            if name in ("dateTime", "expires")
            else value
            for name, value in row[kind].items()
        }
        assert actual == expected
        assert round(row["dateTime"].timestamp() * 1000) == event.event_time_ms
    with pytest.raises(FileExistsError):
        ParquetEventWriter(tmp_path / "nexmark")


def test_command_writes_both_and_summarises(kafka, tmp_path: Path, capsys):
    topic = kafka.new_topic("nexmark-cli")
    arguments = ["--events", "1000", "--kafka", kafka.bootstrap_servers, "--topic", topic]
    assert main([*arguments, "--parquet", str(tmp_path / "out"), "--seed", "3"]) == 0
    output = capsys.readouterr().out
    assert "1000 events: 20 persons, 60 auctions, 920 bids" in output
    assert "event time 2015-07-15 00:00:00.000 to 2015-07-15 00:00:00.100 UTC (0.100 s)" in output
    expected = [json_record(event.payload) for event in generate(1_000, seed=3)]
    assert [record.value() for record in kafka.read_all(topic)] == expected
    assert pq.read_table(tmp_path / "out").num_rows == 1_000
