"""Users' Python functions: Dagger's one-function-per-file convention (folder, .zip), decorated modules,
return types, requirements, and the errors that name the file at fault."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pandas as pd
import pytest

from jobs.model import sql as sql_stage
from jobs.udfs.config import PythonUdfsConfig
from jobs.udfs.python_udfs import (
    PythonUdfError,
    check_requirements,
    dagger_function,
    describe,
    load_functions,
)
from jobs.udfs.python_udfs import register as register_python

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "python_udfs"


PYFLINK_STYLE = """
from pyflink.table import DataTypes
from pyflink.table.udf import udf


@udf(result_type=DataTypes.BIGINT())
def add_one(value):
    return value + 1
"""
PYFLINK_PANDAS_STYLE = """
from pyflink.table import DataTypes
from pyflink.table.udf import udf


@udf(result_type=DataTypes.ARRAY(DataTypes.STRING()), func_type="pandas")
def shout(texts):
    return texts.map(lambda text: [text.upper() + "!"])
"""


def dagger_zip(path: Path) -> Path:
    """A zip laid out like Dagger's dagger-py-functions, its files written for PyFlink."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("udfs/__init__.py", "")
        archive.writestr("udfs/scalar/add_one.py", PYFLINK_STYLE)
        archive.writestr("udfs/scalar/shout.py", PYFLINK_PANDAS_STYLE)
    return path


def test_daggers_samples_from_a_folder_a_zip_and_a_module_in_sql(spark, tmp_path):
    config = PythonUdfsConfig(
        files=[str(EXAMPLES), str(dagger_zip(tmp_path / "udfs.zip"))], modules=["tests.python_udf_module"]
    )
    registered = register_python(spark, config)
    assert sorted(function.sql_name for function in registered) == [
        "ADD_ONE", "Initials", "MULTIPLY", "SAMPLE", "SHOUT", "fahrenheit",
    ]  # fmt: skip
    [row] = sql_stage.analyse(
        spark,
        """SELECT MULTIPLY(5, 10) AS product, sample('input_text_') AS sampled, add_one(41) AS answer,
                  Shout('hey') AS shouted, Initials('Spark Structured Streaming') AS letters,
                  fahrenheit(c) AS f
           FROM VALUES (-40.0D), (100.0D) AS t(c) WHERE c = 100""",
    ).collect()
    # Dagger's own tests: multiply(5, 10) == 50 and sample("input_text_") == "input_text_sample_text".
    assert row.product == 50.0
    assert row.sampled == "input_text_" + (EXAMPLES / "data" / "sample_data.txt").read_text()
    assert row.sampled == "input_text_sample_text"
    assert (row.answer, row.shouted, row.letters) == (42, ["HEY!"], ["S", "S", "S"])
    assert row.f == 100 * 9 / 5 + 32


def test_return_types_from_declarations_and_annotations():
    def plain(values: list[int]) -> list[int]:
        return values

    def batch(values: pd.Series) -> pd.Series:
        return values

    def declared_batch(values: pd.Series) -> pd.Series:
        return values

    def untyped(value):
        return value

    assert (describe(plain, "P", "test").return_type, describe(plain, "P", "test").vectorized) == (
        "array<bigint>",
        False,
    )
    declared = describe(dagger_function(returns="decimal(10, 2)")(declared_batch), "B", "test")
    assert (declared.return_type, declared.vectorized) == ("decimal(10, 2)", True)
    with pytest.raises(PythonUdfError, match="test: function batch declares no SQL return type"):
        describe(batch, "B", "test")  # a Series says nothing of its SQL type
    with pytest.raises(PythonUdfError, match="function untyped declares no SQL return type"):
        describe(untyped, "U", "test")


def test_files_that_break_the_convention_are_named(tmp_path):
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "price.py").write_text("def cost(x: float) -> float:\n    return x\n")
    with pytest.raises(PythonUdfError, match=r"price\.py: defines no function 'price'"):
        load_functions(PythonUdfsConfig(files=[str(wrong)]))

    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(PythonUdfError, match=r"notes\.txt: Python files should be in \.py or \.zip format"):
        load_functions(PythonUdfsConfig(files=[str(tmp_path / "notes.txt")]))

    broken = tmp_path / "broken.py"
    broken.write_text("import not_a_module_anywhere\n")
    with pytest.raises(PythonUdfError, match=r"broken\.py: cannot be imported: ModuleNotFoundError"):
        load_functions(PythonUdfsConfig(files=[str(broken)]))

    twice = tmp_path / "twice"
    (twice / "a").mkdir(parents=True)
    (twice / "b").mkdir()
    for folder in ("a", "b"):
        (twice / folder / "same.py").write_text("def same(x: int) -> int:\n    return x\n")
    with pytest.raises(PythonUdfError, match="python function SAME is defined twice"):
        load_functions(PythonUdfsConfig(files=[str(twice)]))

    with pytest.raises(PythonUdfError, match=r"modules: cannot import tests\.python_udf_module_missing"):
        load_functions(PythonUdfsConfig(modules=["tests.python_udf_module_missing"]))


def test_requirements_are_checked_not_installed(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(
        "# what the functions import\npandas>=1\npyarrow<1  # too old\nno-such-dist==1.0\n"
    )
    with pytest.raises(PythonUdfError) as error:
        check_requirements(str(requirements))
    message = str(error.value)
    assert "pyarrow<1 (installed: " in message and "no-such-dist==1.0 (not installed)" in message
    assert "pandas" not in message.split("environment: ", 1)[1].split(". Install")[0]
    assert f".venv/bin/pip install -r {requirements}" in message
    requirements.write_text("pandas>=1\n")
    check_requirements(str(requirements))  # satisfied: no error
