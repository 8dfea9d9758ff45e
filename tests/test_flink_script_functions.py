"""Flink SQL scripts' `CREATE FUNCTION`: a Java class of `eval` methods from a jar the script or the dagger
names, called in the JVM (Nexmark q14's `count_char`), and a Python function of a module; what is
refused, and when."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from jobs.engine.jvm import jobs_jar
from jobs.model.spec import DaggerConfigError
from jobs.project import BUILD_DIR
from jobs.running.runner import DaggerBuildError, build_dagger
from tests.test_flink_scripts import BID_VIEW, EVENTS_TABLE, VARIABLES, _event, load

COUNT_CHARACTERS = "dagger.jobs.udfs.scripted.CountCharacters"


def test_jar(folder: Path, *classes: str) -> Path:
    """A jar of the module's JUnit classes named (`jvm/src/test/java`): none is in the project's jar."""
    jobs_jar()  # builds the module, its test classes too, when a source changed
    jar = folder / "functions.jar"
    with zipfile.ZipFile(jar, "w") as archive:
        for name in classes:
            entry = name.replace(".", "/") + ".class"
            archive.write(BUILD_DIR / "jvm" / "test-classes" / entry, entry)
    return jar


test_jar.__test__ = False  # a helper, not a test

COUNTED = """
CREATE FUNCTION count_char AS 'dagger.jobs.udfs.scripted.CountCharacters' USING JAR '${JAR}';
CREATE TEMPORARY FUNCTION initials AS 'tests.python_udf_module.initials' LANGUAGE PYTHON;

CREATE TABLE counted (auction BIGINT, ones BIGINT, by_code BIGINT, letters ARRAY<STRING>)
WITH ('connector' = 'print');

INSERT INTO counted
SELECT auction, count_char(CAST(price AS STRING), '1'), count_char(CAST(price AS STRING), 49),
       initials('big bid')
FROM bid
"""


def test_create_function_declares_the_dagger_s_java_and_python_functions(tmp_path):
    variables = {**VARIABLES, "JAR": "lib/functions.jar"}
    spec = load(tmp_path, {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": COUNTED}, variables)
    assert spec.functions.java_udfs.model_dump() == {
        "jars": [str(tmp_path / "lib" / "functions.jar")],  # relative to the dagger file
        "classes": {"count_char": COUNT_CHARACTERS},
    }
    assert spec.functions.python_udfs.functions == {"initials": "tests.python_udf_module.initials"}


def test_a_java_function_runs_in_the_jvm_and_a_python_one_beside_it(tmp_path, kafka, start_dagger):
    events = kafka.new_topic("events")
    kafka.produce(
        events,
        [
            _event(1, 1_000, auction=1, bidder=7, price=1011),
            _event(1, 2_000, auction=2, bidder=8, price=20),
        ],
    )
    jar = test_jar(tmp_path, COUNT_CHARACTERS)
    variables = {**VARIABLES, "BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "EVENTS_TOPIC": events}
    spec = load(
        tmp_path,
        {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": COUNTED.replace("${JAR}", str(jar))},
        variables,
    )
    running = start_dagger(spec)
    running.process_available()
    rows = [json.loads(line.split(" | ", 1)[1]) for line in running.logged]
    assert sorted(rows, key=lambda row: row["auction"]) == [
        {"auction": 1, "ones": 3, "by_code": 3, "letters": ["b", "b"]},
        {"auction": 2, "ones": 0, "by_code": 0, "letters": ["b", "b"]},
    ]


def _build_refusal(spark, tmp_path: Path, script: str, **keys: object) -> str:
    spec = load(tmp_path, {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": script}, **keys)
    with pytest.raises(DaggerBuildError) as raised:
        build_dagger(spark, spec)
    return str(raised.value)


BLACKHOLE_INSERT = """
CREATE TABLE outcome (auction BIGINT, counted BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO outcome SELECT auction, f(CAST(price AS STRING), '1') FROM bid
"""


def test_a_class_not_in_the_jars_or_needing_one_that_is_not_is_refused_before_the_run(spark, tmp_path):
    only_the_function = test_jar(tmp_path, "dagger.jobs.udfs.scripted.NeedsAbsentBase")
    declared = "CREATE FUNCTION f AS 'dagger.jobs.udfs.scripted.NeedsAbsentBase';" + BLACKHOLE_INSERT
    functions = {"java_udfs": {"jars": [str(only_the_function)]}}
    assert (
        "functions.java_udfs: f: function class dagger.jobs.udfs.scripted.NeedsAbsentBase needs "
        "dagger.jobs.udfs.scripted.AbsentBase, which is not on the class path"
    ) in _build_refusal(spark, tmp_path, declared, functions=functions)
    missing = "CREATE FUNCTION f AS 'com.example.Missing';" + BLACKHOLE_INSERT
    assert (
        "functions.java_udfs: f: function class com.example.Missing is not on the class path"
    ) in _build_refusal(spark, tmp_path, missing, functions=functions)


def test_a_call_no_eval_takes_is_refused_naming_the_class(spark, tmp_path):
    jar = test_jar(tmp_path, COUNT_CHARACTERS)
    script = f"CREATE FUNCTION f AS '{COUNT_CHARACTERS}' USING JAR '{jar}';" + BLACKHOLE_INSERT.replace(
        "'1')", "TRUE)"
    )
    assert (
        f"f ({COUNT_CHARACTERS}) has no eval method taking (STRING, BOOLEAN); it has: "
        "long eval(String, String); long eval(String, long)"
    ) in _build_refusal(spark, tmp_path, script)


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        (
            "CREATE FUNCTION f AS 'f.g' LANGUAGE SQL",
            "q.sql, line 1, CREATE FUNCTION f: LANGUAGE SQL: a function is written in Java, Scala or Python",
        ),
        (
            "CREATE FUNCTION f AS 'm.f' LANGUAGE PYTHON USING JAR '/f.jar'",
            "q.sql, line 1, CREATE FUNCTION f: a Python function is imported from the environment",
        ),
        (
            "CREATE FUNCTION f AS 'f.G' USING FILE '/f.jar'",
            "q.sql, line 1, CREATE FUNCTION f: USING FILE '/f.jar': a function is loaded from jars only",
        ),
    ],
    ids=["language", "python-jar", "file"],
)
def test_a_function_of_another_kind_is_refused_naming_it(tmp_path, statement, message):
    script = statement + ";" + BLACKHOLE_INSERT
    with pytest.raises(DaggerConfigError) as raised:
        load(tmp_path, {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": script})
    assert message in str(raised.value)
