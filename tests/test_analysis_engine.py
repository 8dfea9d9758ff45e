"""The Analysis API's engine on real Spark: a project's queries see its own tables and nothing else, with
exact rows for legitimate queries, and materialized tables swap whole snapshots under running readers."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from jobs.analysis.engine import AnalysisEngine, AnalysisError
from jobs.analysis.materialized import Snapshots
from jobs.analysis.project import load_projects
from tests.analysis_lakes import RIVAL_MARKER, plant, plant_continuous_tables, write_collection

TOP_PAGES = {
    "name": "top_pages",
    "refresh_interval": "5m",
    "sql": "SELECT url, count(*) AS views FROM pageview GROUP BY url",
}


@pytest.fixture(scope="module")
def lakes(tmp_path_factory, postgres):
    database_url = f"postgresql://{postgres.user}:{postgres.password}@{postgres.host}:{postgres.port}/{postgres.database}"
    plant_continuous_tables(database_url)
    return plant(tmp_path_factory.mktemp("analysis"), database_url, materialized=[TOP_PAGES])


@pytest.fixture(scope="module")
def engine(spark, lakes) -> AnalysisEngine:
    return AnalysisEngine(spark, load_projects(lakes.folder))


def rows(engine: AnalysisEngine, sql: str, project: str = "shop") -> list[tuple]:
    return [tuple(row.values()) for row in engine.execute(project, sql).rows.to_pylist()]


def test_a_join_of_two_collections_returns_exactly_the_expected_rows(engine):
    assert rows(
        engine,
        """SELECT p.user_id, count(DISTINCT p.url) AS pages, round(sum(o.amount), 2) AS spent
           FROM pageview p JOIN orders o ON o.user_id = p.user_id
           GROUP BY p.user_id ORDER BY p.user_id""",
    ) == [("u1", 2, 25.0), ("u2", 2, 75.0)]  # each order once per page view of its user


def test_window_functions_and_dagger_functions(engine):
    assert rows(
        engine,
        """SELECT user_id, url, row_number() OVER (PARTITION BY user_id ORDER BY at) AS visit
           FROM pageview ORDER BY user_id, visit""",
    ) == [("u1", "/", 1), ("u1", "/cart", 2), ("u2", "/", 1), ("u2", "/cart", 2), ("u3", "/help", 1)]
    assert rows(
        engine,
        """SELECT user_id, DistinctCount(url) AS pages, sort_array(CollectArray(url)) AS urls,
                  rank() OVER (ORDER BY count(*) DESC, user_id) AS busiest
           FROM pageview GROUP BY user_id ORDER BY user_id""",
    ) == [("u1", 2, ["/", "/cart"], 1), ("u2", 2, ["/", "/cart"], 2), ("u3", 1, ["/help"], 3)]


def test_continuous_tables_join_collections(engine):
    assert rows(
        engine,
        """SELECT r.user_id, r.spent, count(*) AS views FROM continuous.revenue r
           JOIN pageview p USING (user_id) GROUP BY r.user_id, r.spent ORDER BY r.user_id""",
    ) == [("u1", 12.5, 2), ("u2", 37.5, 2)]
    with pytest.raises(AnalysisError, match="scores"):
        engine.frame("shop", "SELECT * FROM continuous.scores")  # rival's
    assert rows(engine, "SELECT score FROM continuous.scores", project="rival") == [("RIVAL-score",)]


def test_a_cte_named_like_a_collection_is_the_cte(engine):
    assert rows(engine, "WITH pageview AS (SELECT 'mine' AS url) SELECT url FROM pageview") == [("mine",)]


def test_the_same_name_in_two_projects_is_each_projects_own_collection(engine):
    assert rows(engine, "SELECT url FROM pageview WHERE url LIKE '%RIVAL%'") == []
    assert rows(engine, "SELECT url FROM pageview", project="rival") == [(f"/{RIVAL_MARKER}",)]


@pytest.mark.parametrize(
    ("sql", "named"),
    [
        ("SELECT * FROM secrets", "secrets"),
        ("SELECT * FROM rival.secrets", "rival"),
        ("SELECT * FROM parquet.`/tmp`", "parquet"),
        ("SELECT * FROM pageview UNION ALL SELECT * FROM (SELECT * FROM secrets)", "secrets"),
        ("SELECT reflect('java.lang.System', 'getenv', 'HOME')", "reflect"),
        ("CREATE TEMPORARY VIEW v AS SELECT 1", "view"),
        ("SET spark.sql.ansi.enabled=false", "set"),
    ],
)
def test_an_escape_is_refused_before_spark(engine, sql, named):
    with pytest.raises(AnalysisError, match="query refused") as refused:
        engine.frame("shop", sql)
    assert named.lower() in str(refused.value).lower()


def test_a_query_over_a_table_that_does_not_exist_names_it(engine):
    with pytest.raises(AnalysisError, match="nowhere"):
        engine.frame("shop", "SELECT * FROM nowhere")


def test_bad_sql_names_line_and_column(engine):
    with pytest.raises(AnalysisError, match="no_such_column"):
        engine.frame("shop", "SELECT no_such_column FROM pageview")


def test_a_collection_that_grows_a_field_reads_null_for_older_files(spark, tmp_path):
    lakes = plant(tmp_path)
    import pyarrow as pa

    write_collection(
        lakes.lake, "shop", "orders", pa.table({"user_id": ["u9"], "amount": [1.0], "coupon": ["X"]}), "1"
    )
    engine = AnalysisEngine(spark, load_projects(lakes.folder))
    assert rows(engine, "SELECT user_id, coupon FROM orders ORDER BY user_id") == [
        ("u1", None),
        ("u2", None),
        ("u2", None),
        ("u9", "X"),
    ]


def test_a_materialized_table_reads_its_snapshot_and_refuses_before_the_first(engine, lakes):
    Snapshots(str(lakes.tables), "shop", "top_pages").folder.mkdir(parents=True, exist_ok=True)
    if Snapshots(str(lakes.tables), "shop", "top_pages").current() is None:
        with pytest.raises(AnalysisError, match=r"materialized\.top_pages has not been refreshed yet"):
            engine.frame("shop", "SELECT * FROM materialized.top_pages")
    engine.refresh("shop", "top_pages")
    assert rows(engine, "SELECT url, views FROM materialized.top_pages ORDER BY url") == [
        ("/", 2),
        ("/cart", 2),
        ("/help", 1),
    ]


def test_a_refresh_swaps_whole_snapshots_under_a_reader_running_throughout(spark, tmp_path):
    """Each refresh writes a snapshot in which every row has the same `generation`; a reader running all
    along must see one generation per read, never an empty table, and generations that only go up."""
    lakes = plant(
        tmp_path,
        materialized=[
            {
                "name": "generations",
                "refresh_interval": "1m",
                "sql": "SELECT max(generation) AS generation, id FROM counter, range(200) GROUP BY id",
            }
        ],
    )
    import pyarrow as pa

    engine = AnalysisEngine(spark, load_projects(lakes.folder))

    def next_generation(generation: int) -> None:
        write_collection(
            lakes.lake, "shop", "counter", pa.table({"generation": [generation]}), f"{generation}"
        )

    next_generation(1)
    engine.refresh("shop", "generations")
    seen: list[tuple[int, int]] = []  # (distinct generations, rows) per read
    errors: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                table = engine.execute("shop", "SELECT generation FROM materialized.generations").rows
                generations = sorted(set(table.column("generation").to_pylist()))
                seen.append((generations[0] if len(generations) == 1 else -len(generations), table.num_rows))
            except BaseException as error:  # reported below
                errors.append(error)
                return

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for generation in range(2, 6):
            next_generation(generation)
            engine.refresh("shop", "generations")
            swapped = len(seen)
            while len(seen) < swapped + 2 and reader.is_alive():  # one whole read after the swap, at least
                threading.Event().wait(0.05)
    finally:
        done.set()
        reader.join()
    assert not errors, errors
    assert all(count == 200 for _, count in seen), "a read saw a partial or empty snapshot"
    generations = [generation for generation, _ in seen]
    assert min(generations) >= 1, "a read saw two snapshots mixed"
    assert generations == sorted(generations)
    assert generations[-1] == 5
    snapshots = sorted(Snapshots(str(lakes.tables), "shop", "generations").folder.glob("snapshot-*"))
    assert len(snapshots) == 2  # the current one and the one it replaced


def test_a_failed_refresh_leaves_the_old_snapshot(spark, tmp_path):
    lakes = plant(tmp_path, materialized=[TOP_PAGES])
    engine = AnalysisEngine(spark, load_projects(lakes.folder))
    first = engine.refresh("shop", "top_pages")
    # A file that is not Parquet in the lake fails the next refresh while Spark reads it.
    broken = lakes.lake / "shop.pageview" / "dt=2026-11-26" / "hr=00" / "part-9.parquet"
    broken.write_bytes(b"not parquet at all")
    with pytest.raises(Exception, match=r"part-9\.parquet"):
        engine.refresh("shop", "top_pages")
    snapshots = Snapshots(str(lakes.tables), "shop", "top_pages")
    assert snapshots.current() == first
    assert sorted(path.name for path in snapshots.folder.glob("snapshot-*")) == [first.name]
    assert rows(engine, "SELECT sum(views) FROM materialized.top_pages") == [(5,)]


def test_projects_folder_errors_name_the_file(tmp_path: Path):
    (tmp_path / "bad.yaml").write_text("project: Shop\nlake: l\ntables: t\n")
    from jobs.model.spec import DaggerConfigError

    with pytest.raises(DaggerConfigError, match=r"bad.yaml.*project"):
        load_projects(tmp_path)
