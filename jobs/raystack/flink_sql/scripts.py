"""Flink SQL scripts as daggers: the `CREATE TABLE`, `CREATE VIEW`, `CREATE FUNCTION` and `INSERT INTO`
statements Flink users keep their jobs in, read into the dagger's own keys (streams, sinks, the query, the
functions).

Each file is parsed once, by the translator's dialect (`dialect`), after its `${NAME}` placeholders are
filled from the dagger's `variables`. The INSERT's target table becomes the sink, the tables its query
reads (through the views) the streams, and the views it reads become the query's WITH clause ahead of its
own text, so the translator sees one Flink query. What has no counterpart (a connector, format or option)
is refused before anything starts, naming the file, line and statement.

What maps to what (docs/flink-scripts.md has the whole table):

- a `kafka` table read with `json` (or `avro-confluent`): a `kafka` stream, the table's columns its
  `record_schema`; `name AS expression`: one of its `computed_columns`, translated to Spark SQL;
- `WATERMARK FOR c AS c - INTERVAL 'n' SECOND`: `event_time_field` and `rowtime_column` c, and a
  `watermark_delay` of n seconds;
- the INSERT's table: a `kafka`, `parquet` (`filesystem`), `log` (`print`) or `blackhole` sink;
- `CREATE FUNCTION f AS 'class'` (Java, `USING JAR`): one of `functions.java_udfs`; `... LANGUAGE PYTHON`
  of a `package.module.function`: one of `functions.python_udfs.functions`.
- a table only looked up in a temporal join (`FOR SYSTEM_TIME AS OF` a processing-time attribute), a CSV
  file of Flink's legacy filesystem options: a common table expression reading the file (Spark's `csv.` path),
  the stream-static join's static side;
- `p_time AS PROCTIME()`: a computed column `current_timestamp()`, the stream's processing-time attribute.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from jobs.model.sql_tree import line_and_column, parse_statements, position, spark_text
from jobs.raystack.flink_sql import FlinkSqlError, translate
from jobs.raystack.flink_sql.dialect import FlinkDialect, Refused
from jobs.raystack.flink_sql.errors import parse_message

_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SECONDS = {"SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": 86400}
_KAFKA_STARTS = {"earliest-offset": "earliest", "latest-offset": "latest", "group-offsets": None}
_DELIVERIES = {"at-least-once": "at_least_once", "exactly-once": "exactly_once", "none": "at_least_once"}
_AVRO_TYPES: dict[exp.DataType.Type, Any] = {
    exp.DataType.Type.BOOLEAN: "boolean",
    exp.DataType.Type.INT: "int",
    exp.DataType.Type.BIGINT: "long",
    exp.DataType.Type.FLOAT: "float",
    exp.DataType.Type.DOUBLE: "double",
    exp.DataType.Type.VARCHAR: "string",
    exp.DataType.Type.CHAR: "string",
    exp.DataType.Type.TEXT: "string",
    exp.DataType.Type.DATE: {"type": "int", "logicalType": "date"},
    exp.DataType.Type.TIMESTAMP: {"type": "long", "logicalType": "timestamp-millis"},
    exp.DataType.Type.TIMESTAMPTZ: {"type": "long", "logicalType": "timestamp-millis"},
    exp.DataType.Type.TIMESTAMPLTZ: {"type": "long", "logicalType": "timestamp-millis"},
}
"""Flink's column types as the Avro types a JSON stream's `record_schema` takes (every column nullable)."""


class ScriptError(ValueError):
    """A script that cannot run as a dagger; the message names the file, the line and the statement."""


@dataclass(frozen=True)
class ScriptFile:
    """One file of a script: its name as the dagger file gives it, and its text."""

    name: str
    text: str


@dataclass
class _Statement:
    """A statement of a script, with what an error about it needs: its file, text and tokens."""

    file: ScriptFile
    text: str
    """The file's text, placeholders filled (what was parsed)."""
    tree: exp.Expr
    tokens: list[Token]
    """The statement's tokens, up to its `;`."""

    @property
    def source(self) -> str:
        """The statement's text, from its first token to its last."""
        return self.text[self.tokens[0].start : self.tokens[-1].end + 1]

    @property
    def function(self) -> re.Match[str] | None:
        """A `CREATE FUNCTION` statement's parts (sqlglot reads `USING JAR` as an opaque command)."""
        return _FUNCTION.fullmatch(self.source)

    @property
    def title(self) -> str:
        """The statement as errors name it: `CREATE TABLE kafka`, `INSERT INTO nexmark_q1`."""
        if (function := self.function) is not None:
            return f"CREATE FUNCTION {_function_name(function)}"
        if isinstance(self.tree, exp.Command):  # a statement sqlglot keeps as text: its first words
            return " ".join(self.source.split()[:3])
        target = self.tree.this
        name = (target.this if isinstance(target, exp.Schema) else target).sql(dialect=FlinkDialect)
        if isinstance(self.tree, exp.Insert):
            return f"INSERT INTO {name}"
        return f"CREATE {self.tree.args.get('kind', '')} {name}"

    @property
    def name(self) -> str:
        target = self.tree.this
        return (target.this if isinstance(target, exp.Schema) else target).name

    def fail(self, reason: str, node: exp.Expr | None = None) -> ScriptError:
        start = (position(node) if node is not None else None) or self.tokens[0].start
        line, _ = line_and_column(self.text, start)
        return ScriptError(f"{self.file.name}, line {line}, {self.title}: {reason}")

    def query_text(self) -> str:
        """The text of the statement's query (a view's or an INSERT's), as written."""
        depth = 0
        for token in self.tokens:
            depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(token.token_type, 0)
            if depth == 0 and token.token_type in (TokenType.SELECT, TokenType.WITH):
                return self.text[token.start : self.tokens[-1].end + 1]
        raise self.fail("it holds no SELECT")


@dataclass
class _Table:
    statement: _Statement
    options: dict[str, str] = field(default_factory=dict)

    def option(self, key: str, default: str | None = None) -> str:
        value = self.options.pop(key, default)
        if value is None:
            raise self.statement.fail(f"option '{key}' is needed")
        return value

    def refuse_left_over(self, role: str) -> None:
        """Every option of the table has been mapped: one left is refused by name."""
        if self.options:
            names = ", ".join(f"'{key}'" for key in self.options)
            raise self.statement.fail(f"option(s) {names} of a {role} have no counterpart in a dagger")


def script_dagger(files: list[ScriptFile], variables: dict[str, str]) -> dict[str, Any]:
    """The dagger keys the script gives: `streams`, `sinks`, `sql` (Flink SQL), `sql_dialect`,
    `rowtime_column` and `watermark_delay`; and `declared_functions`, the functions it declares, which the
    dagger file's `functions` section takes in."""
    statements = [statement for file in files for statement in _statements(file, variables)]
    tables: dict[str, _Statement] = {}
    views: dict[str, _Statement] = {}
    inserts: list[_Statement] = []
    functions = _Functions()
    for statement in statements:
        tree = statement.tree
        kind = tree.args.get("kind") if isinstance(tree, exp.Create) else None
        if kind == "TABLE":
            tables[statement.name.lower()] = statement
        elif kind == "VIEW":
            views[statement.name.lower()] = statement
        elif statement.function is not None:
            _declare_function(statement, statement.function, functions)
        elif isinstance(tree, exp.Insert):
            inserts.append(statement)
        else:
            raise statement.fail("a script holds CREATE TABLE, CREATE VIEW and INSERT INTO statements only")
    if len(inserts) != 1:
        found = ", ".join(insert.title for insert in inserts) or "none"
        raise ScriptError(f"a script runs one INSERT INTO statement (found: {found})")
    insert = inserts[0]
    sink_table = tables.get(insert.name.lower())
    if sink_table is None:
        raise insert.fail(f"table {insert.name!r} is not created by the script (CREATE TABLE ... WITH (...))")
    read_views = _views_read(insert.tree.expression, views)
    queries = [statement.tree.expression for statement in [insert, *read_views]]
    read_tables = {name.lower() for query in queries for name in _names_read(query) if name.lower() in tables}
    looked_up = {name for name in read_tables if not any(name in _names_read(q, False) for q in queries)}
    streams = [_stream(tables[name]) for name in sorted(read_tables - looked_up)]
    side_tables = [_side_table(tables[name]) for name in sorted(looked_up)]
    event_times = {(stream.event_time, stream.delay_seconds) for stream in streams}
    if len(event_times) > 1:
        described = ", ".join(f"{s.config['table']}: {s.event_time} - {s.delay_seconds}s" for s in streams)
        raise ScriptError(
            f"the tables a dagger reads share one event-time column name and watermark delay ({described})"
        )
    definitions = [*side_tables, *((view.name, view.query_text()) for view in read_views)]
    _checked(insert, _with_views(insert.query_text(), definitions))  # errors placed in the query as written
    sql = _checked(insert, _with_views(_as_sink_columns(insert.query_text(), sink_table), definitions))
    return {
        "streams": [stream.config for stream in streams],
        "sinks": [_sink(sink_table)],
        "sql": sql,
        "sql_dialect": "flink",
        "rowtime_column": streams[0].event_time if streams else "rowtime",
        "watermark_delay": f"{streams[0].delay_seconds}s" if streams else "0s",
        "declared_functions": functions,
    }


@dataclass
class _Functions:
    """The functions a script declares, by SQL name: Python ones (`package.module.function`), Java classes
    and the jars those are loaded from."""

    python: dict[str, str] = field(default_factory=dict)
    java: dict[str, str] = field(default_factory=dict)
    jars: list[str] = field(default_factory=list)

    def added_to(self, functions: dict[str, Any] | None) -> dict[str, Any] | None:
        """The dagger file's `functions` section with these added (None when there is nothing)."""
        if not (self.python or self.java) and functions is None:
            return None
        section = dict(functions or {})
        python = dict(section.get("python_udfs") or {})
        python["functions"] = {**(python.get("functions") or {}), **self.python}
        java = dict(section.get("java_udfs") or {})
        java["classes"] = {**(java.get("classes") or {}), **self.java}
        java["jars"] = [*(java.get("jars") or []), *self.jars]
        return {**section, "python_udfs": python, "java_udfs": java}


_FUNCTION = re.compile(
    r"CREATE\s+(?:TEMPORARY\s+(?:SYSTEM\s+)?)?FUNCTION\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<name>[\w.`]+)\s+"
    r"AS\s+'(?P<class>[^']*)'(?:\s+LANGUAGE\s+(?P<language>\w+))?(?:\s+USING\s+(?P<jars>.*))?",
    re.IGNORECASE | re.DOTALL,
)
_JAR = re.compile(r"JAR\s+'([^']*)'", re.IGNORECASE)


def _function_name(function: re.Match[str]) -> str:
    return function.group("name").split(".")[-1].strip("`")


def _declare_function(statement: _Statement, function: re.Match[str], functions: _Functions) -> None:
    """`CREATE FUNCTION name AS 'class' [LANGUAGE JAVA | SCALA | PYTHON] [USING JAR 'path', ...]`."""
    name, target = _function_name(function), function.group("class")
    language = (function.group("language") or "JAVA").upper()
    jars = function.group("jars") or ""
    if _JAR.sub("", jars).replace(",", "").strip():
        raise statement.fail(f"USING {jars.strip()}: a function is loaded from jars only (USING JAR 'path')")
    if language == "PYTHON":
        if jars:
            raise statement.fail("a Python function is imported from the environment, not from jars")
        functions.python[name] = target
    elif language in ("JAVA", "SCALA"):
        functions.java[name] = target
        functions.jars += [jar for jar in _JAR.findall(jars) if jar not in functions.jars]
    else:
        raise statement.fail(f"LANGUAGE {language}: a function is written in Java, Scala or Python")


def fill_placeholders(file: ScriptFile, variables: dict[str, str]) -> str:
    """The file's text with each `${NAME}` replaced by `variables[NAME]`; an unknown name is refused."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in variables:
            line, _ = line_and_column(file.text, match.start())
            raise ScriptError(f"{file.name}, line {line}: ${{{name}}} is not one of the dagger's variables")
        return variables[name]

    return _PLACEHOLDER.sub(value, file.text)


def _statements(file: ScriptFile, variables: dict[str, str]) -> list[_Statement]:
    text = fill_placeholders(file, variables)
    try:
        trees = parse_statements(text, FlinkDialect)
        tokens = FlinkDialect().tokenize(text)
    except Refused as refused:
        line, _ = line_and_column(text, refused.start)
        raise ScriptError(f"{file.name}, line {line}: {refused.reason}") from None
    except (ParseError, TokenError) as error:
        raise ScriptError(f"{file.name} cannot be parsed: {parse_message(error)}") from None
    spans: list[list[Token]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            spans.append([])
        else:
            spans[-1].append(token)
    spans = [span for span in spans if span]
    trees = [tree for tree in trees if not isinstance(tree, exp.Semicolon)]  # a comment after the last `;`
    return [_Statement(file, text, tree, span) for tree, span in zip(trees, spans, strict=True)]


def _names_read(query: exp.Expr, lookups: bool = True) -> set[str]:
    """The tables and views a query reads (the window functions' `TABLE t` included), not its own CTEs;
    with `lookups` False, not the tables it looks up in a temporal join (`FOR SYSTEM_TIME AS OF`)."""
    ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    return {
        table.name
        for table in query.find_all(exp.Table)
        if table.name.lower() not in ctes and (lookups or not table.args.get("version"))
    }


def _views_read(query: exp.Expr, views: dict[str, _Statement]) -> list[_Statement]:
    """The views `query` reads, with the views they read, each after those it reads."""
    ordered: list[_Statement] = []

    def visit(names: Iterable[str]) -> None:
        for name in sorted(names):
            view = views.get(name.lower())
            if view is not None and view not in ordered:
                visit(_names_read(view.tree.expression))
                ordered.append(view)

    visit(_names_read(query))
    return ordered


def _with_views(query: str, views: list[tuple[str, str]]) -> str:
    """The INSERT's query as one Flink query: the side tables and views it reads (name, query) as its
    first common table expressions."""
    if not views:
        return query
    definitions = ",\n".join(f"`{name}` AS (\n{text}\n)" for name, text in views)
    if query[:4].upper() == "WITH":
        return f"WITH {definitions},\n{query[4:].lstrip()}"
    return f"WITH {definitions}\n{query}"


def _as_sink_columns(query: str, sink: _Statement) -> str:
    """The query's columns as the sink table's: taken by position (Flink writes them so), named and cast
    to the types the table declares, as Flink casts a query's column to its sink's."""
    schema = sink.tree.this
    parts = schema.expressions if isinstance(schema, exp.Schema) else []
    columns = [column for column in parts if isinstance(column, exp.ColumnDef) and column.args.get("kind")]
    if not columns:
        return query
    names = ", ".join(f"`{column.name}`" for column in columns)
    casts = ", ".join(
        f"CAST(`{column.name}` AS {column.args['kind'].sql(dialect=FlinkDialect)}) AS `{column.name}`"
        for column in columns
    )
    return f"SELECT {casts} FROM (\n{query}\n) AS `{sink.name}` ({names})"


def _checked(insert: _Statement, query: str) -> str:
    """`query`, once the translator has taken it (its errors name the INSERT statement)."""
    try:
        translate(query, key=insert.title)
    except FlinkSqlError as error:
        raise insert.fail(str(error).removeprefix(f"{insert.title} ")) from None
    return query


@dataclass(frozen=True)
class _Stream:
    config: dict[str, Any]
    event_time: str
    delay_seconds: int


def _stream(statement: _Statement) -> _Stream:
    table = _Table(statement, _options(statement))
    connector = table.option("connector")
    if connector != "kafka":
        raise statement.fail(
            f"'connector' = '{connector}' cannot be read as a stream; a script's tables are read from 'kafka'"
        )
    schema = statement.tree.this
    assert isinstance(schema, exp.Schema)
    columns = [column for column in schema.expressions if isinstance(column, exp.ColumnDef)]
    watermarks = [node for node in schema.expressions if isinstance(node, exp.WatermarkColumnConstraint)]
    other = [
        node
        for node in schema.expressions
        if not isinstance(node, exp.ColumnDef | exp.WatermarkColumnConstraint)
    ]
    if other:
        raise statement.fail(f"{other[0].sql(dialect=FlinkDialect)} has no counterpart in a stream", other[0])
    if len(watermarks) != 1:
        raise statement.fail("a table read as a stream needs one WATERMARK FOR its event-time column")
    event_time, delay = _watermark(statement, watermarks[0])
    computed = {
        column.name: _computed_column(statement, column)
        for column in columns
        if column.find(exp.ComputedColumnConstraint)
    }
    physical = [column for column in columns if column.name not in computed]
    config: dict[str, Any] = {
        "kind": "kafka",
        "table": statement.name,
        "bootstrap_servers": table.option("properties.bootstrap.servers"),
        "event_time_field": event_time,
        "computed_columns": computed,
        "metadata_columns": False,  # a Flink table has the columns it declares, no more
        **_topics(table),
        **_kafka_start(table),
        **_stream_format(table, physical),
        "consumer_config": _client_properties(table),
    }
    for ignored in [key for key in table.options if key.startswith("sink.")]:
        del table.options[ignored]  # a table that is only read: how Flink would write it does not matter
    table.refuse_left_over("Kafka table read as a stream")
    return _Stream(config, event_time, delay)


def _partition_columns(statement: _Statement) -> list[str]:
    """The columns of the table's `PARTITIONED BY (...)`, if any."""
    properties = statement.tree.args.get("properties")
    partitioned = properties.find(exp.PartitionedByProperty) if properties else None
    return [column.name for column in partitioned.this.expressions] if partitioned else []


def _side_table(statement: _Statement) -> tuple[str, str]:
    """A table looked up in a temporal join (`FOR SYSTEM_TIME AS OF` a processing-time attribute): a CSV
    file, as the query that reads it (its name and text), which Spark reads when the run starts. Flink 2.3
    looks up such a table with its legacy options ('connector.type' = 'filesystem', 'format.type' =
    'csv'); a 'filesystem' table of the current options is no lookup source there (Flink refuses the
    join), and nor is it here."""
    table = _Table(statement, _options(statement))
    if table.options.get("connector.type") != "filesystem" or table.options.get("format.type") != "csv":
        raise statement.fail(
            "a table looked up FOR SYSTEM_TIME AS OF is a CSV file, as Flink looks one up: 'connector.type' "
            "= 'filesystem', 'connector.path' and 'format.type' = 'csv'"
        )
    del table.options["connector.type"], table.options["format.type"]
    path = table.option("connector.path")
    table.refuse_left_over("CSV side table")
    schema = statement.tree.this
    parts = schema.expressions if isinstance(schema, exp.Schema) else []
    other = [part for part in parts if not isinstance(part, exp.ColumnDef) or part.find(exp.ColumnConstraint)]
    if other or not parts:
        what = other[0].sql(dialect=FlinkDialect) if other else "no columns"
        raise statement.fail(
            f"a CSV side table has physical columns only: {what}", other[0] if other else None
        )
    local = path.removeprefix("file://")
    if "`" in path or ("://" not in local and not Path(local).is_file()):
        raise statement.fail(f"'connector.path' = '{path}': no such file")
    columns = ", ".join(
        f"CAST(_c{index} AS {column.args['kind'].sql(dialect=FlinkDialect)}) AS `{column.name}`"
        for index, column in enumerate(parts)
    )
    return statement.name, f"SELECT {columns} FROM csv.`{path}`"


def _options(statement: _Statement, sink: bool = False) -> dict[str, str]:
    """The table's `WITH` options; `PARTITIONED BY` is refused but on a `sink` (which checks it)."""
    properties = statement.tree.args.get("properties")
    options: dict[str, str] = {}
    for node in properties.expressions if properties else []:
        if isinstance(node, exp.PartitionedByProperty):
            if not sink:
                raise statement.fail("PARTITIONED BY has no counterpart in a dagger", node)
            continue
        if not isinstance(node, exp.Property) or not isinstance(node.args.get("value"), exp.Literal):
            raise statement.fail(f"{node.sql(dialect=FlinkDialect)} is not a 'key' = 'value' option", node)
        options[node.name] = node.args["value"].name
    return options


def _watermark(statement: _Statement, watermark: exp.WatermarkColumnConstraint) -> tuple[str, int]:
    """The event-time column and the delay of `WATERMARK FOR c AS c - INTERVAL 'n' unit` (or `AS c`)."""
    column = watermark.this.name
    strategy = watermark.expression
    if isinstance(strategy, exp.Column) and strategy.name == column:
        return column, 0
    interval = strategy.expression if isinstance(strategy, exp.Sub) else None
    if (
        isinstance(strategy, exp.Sub)
        and isinstance(strategy.this, exp.Column)
        and strategy.this.name == column
        and isinstance(interval, exp.Interval)
        and interval.text("unit").upper() in _SECONDS
        and interval.this.name.isdigit()
    ):
        return column, int(interval.this.name) * _SECONDS[interval.text("unit").upper()]
    raise statement.fail(
        f"WATERMARK FOR {column} AS {strategy.sql(dialect=FlinkDialect)}: a watermark is the column minus "
        "an INTERVAL of seconds, minutes, hours or days",
        watermark,
    )


def _computed_column(statement: _Statement, column: exp.ColumnDef) -> str:
    """A computed column's expression in Spark SQL, translated as a query's would be."""
    expression = column.find(exp.ComputedColumnConstraint).this
    query = exp.select(expression.copy().as_(column.name, quoted=True)).from_(exp.to_table(statement.name))
    try:
        translated = translate(query.sql(dialect=FlinkDialect), key=f"computed column {column.name}")
    except FlinkSqlError as error:
        raise statement.fail(str(error), column) from None
    tree = translated.prepared.tree
    assert isinstance(tree, exp.Select)
    return spark_text(tree.selects[0].unalias())


def _topics(table: _Table) -> dict[str, Any]:
    if "topic-pattern" in table.options:
        return {"topic_pattern": table.option("topic-pattern")}
    return {"topics": [topic.strip() for topic in table.option("topic").split(";")]}


def _kafka_start(table: _Table) -> dict[str, Any]:
    mode = table.option("scan.startup.mode", "group-offsets")
    group = table.options.pop("properties.group.id", None)
    if mode not in _KAFKA_STARTS:
        raise table.statement.fail(
            f"'scan.startup.mode' = '{mode}' has no counterpart; use "
            + ", ".join(f"'{name}'" for name in _KAFKA_STARTS)
        )
    if mode == "group-offsets":
        if group is None:
            raise table.statement.fail("'scan.startup.mode' 'group-offsets' needs 'properties.group.id'")
        reset = table.options.pop("properties.auto.offset.reset", "latest")
        return {"group_id": group, "auto_offset_reset": reset}
    # Flink starts there whatever the group has committed: the group is not the starting point.
    return {"auto_offset_reset": _KAFKA_STARTS[mode]}


def _client_properties(table: _Table) -> dict[str, str]:
    """`properties.*`: Kafka client settings, passed through."""
    keys = [key for key in table.options if key.startswith("properties.")]
    return {key.removeprefix("properties."): table.options.pop(key) for key in keys}


def _stream_format(table: _Table, columns: list[exp.ColumnDef]) -> dict[str, Any]:
    value_format = table.options.pop("value.format", None) or table.option("format")
    if value_format == "json":
        for key in ("json.fail-on-missing-field", "json.timestamp-format.standard"):
            table.options.pop(key, None)  # a missing field is NULL, and either timestamp text is read
        invalid = "drop" if table.options.pop("json.ignore-parse-errors", "false") == "true" else "fail"
        return {
            "format": "json",
            "record_schema": {
                "type": "record",
                "name": table.statement.name,
                "fields": [_avro_field(table.statement, column) for column in columns],
            },
            "invalid_records": {"action": invalid},
        }
    if value_format == "avro-confluent":
        subject = table.options.pop("avro-confluent.subject", None)
        return {
            "format": "avro",
            "schema_registry_url": table.option("avro-confluent.url"),
            **({"schema_subject": subject} if subject else {}),
        }
    raise table.statement.fail(
        f"'format' = '{value_format}' cannot be read as a stream here; use 'json' or 'avro-confluent'"
    )


def _avro_field(statement: _Statement, column: exp.ColumnDef) -> dict[str, Any]:
    return {"name": column.name, "type": ["null", _avro_type(statement, column.args["kind"], column.name)]}


def _avro_type(statement: _Statement, data_type: exp.DataType, where: str) -> Any:
    if data_type.this == exp.DataType.Type.STRUCT:
        fields = [_avro_field(statement, child) for child in data_type.expressions]
        return {"type": "record", "name": where.replace(".", "_"), "fields": fields}
    if data_type.this == exp.DataType.Type.ARRAY:
        return {"type": "array", "items": ["null", _avro_type(statement, data_type.expressions[0], where)]}
    if data_type.this in _AVRO_TYPES:
        return _AVRO_TYPES[data_type.this]
    raise statement.fail(
        f"column {where} of type {data_type.sql(dialect=FlinkDialect)} cannot be read from JSON here",
        data_type,
    )


def _sink(statement: _Statement) -> dict[str, Any]:
    schema = statement.tree.this
    parts = schema.expressions if isinstance(schema, exp.Schema) else []
    keys = [part for part in parts if isinstance(part, exp.PrimaryKey)]
    if keys:
        raise statement.fail("a PRIMARY KEY (an upserting sink) has no counterpart in a dagger yet", keys[0])
    table = _Table(statement, _options(statement, sink=True))
    connector = table.option("connector")
    partitions = _partition_columns(statement)
    if partitions and connector != "filesystem":
        raise statement.fail(f"PARTITIONED BY: a '{connector}' table is not partitioned; 'filesystem' is")
    if connector == "blackhole":
        sink: dict[str, Any] = {"kind": "blackhole"}
    elif connector == "print":
        sink = {"kind": "log"}
    elif connector == "kafka":
        sink = _kafka_sink(table)
    elif connector == "filesystem":
        sink = _filesystem_sink(table, partitions)
    else:
        raise statement.fail(
            f"'connector' = '{connector}' has no sink here; use 'kafka', 'filesystem', 'print' or 'blackhole'"
        )
    table.refuse_left_over(f"'{connector}' table written as a sink")
    return sink


def _kafka_sink(table: _Table) -> dict[str, Any]:
    value_format = table.options.pop("value.format", None) or table.option("format")
    sink: dict[str, Any] = {
        "kind": "kafka",
        "topic": table.option("topic"),
        "bootstrap_servers": table.option("properties.bootstrap.servers"),
    }
    # Which partition a record goes to changes no record.
    table.options.pop("sink.partitioner", None)
    delivery = table.option("sink.delivery-guarantee", "at-least-once")
    if delivery not in _DELIVERIES:
        raise table.statement.fail(f"'sink.delivery-guarantee' = '{delivery}' is not one of Flink's")
    sink["delivery"] = _DELIVERIES[delivery]
    table.options.pop("sink.transactional-id-prefix", None)  # the exactly-once writer names its own
    if value_format == "json":
        sink["format"] = "json"
    elif value_format == "avro-confluent":
        sink["format"] = "avro"
        sink["schema_registry_url"] = table.option("avro-confluent.url")
    else:
        raise table.statement.fail(
            f"'format' = '{value_format}' cannot be written here; use 'json' or 'avro-confluent'"
        )
    sink["producer_config"] = _client_properties(table)
    return sink


_UNWRITTEN_FILESYSTEM_OPTIONS = (
    "sink.partition-commit.",
    "partition.time-extractor.",
    "sink.rolling-policy.",
)
"""A filesystem sink's options that change no row: when a partition is announced (success files,
a metastore), which time its name stands for, and when a file is rolled."""


def _filesystem_sink(table: _Table, partitions: list[str]) -> dict[str, Any]:
    """A `parquet` sink (of Parquet or Flink's CSV files), partitioned as the table is: `dt=.../hm=...`
    folders of its columns' values."""
    file_format = table.option("format")
    if file_format not in ("parquet", "csv"):
        raise table.statement.fail(
            f"'format' = '{file_format}': a 'filesystem' table is written as 'parquet' or 'csv' here"
        )
    for key in [key for key in table.options if key.startswith(_UNWRITTEN_FILESYSTEM_OPTIONS)]:
        del table.options[key]
    table.options.pop("sink.shuffle-by-partition.enable", None)  # which task writes a row changes no row
    sink: dict[str, Any] = {"kind": "parquet", "path": table.option("path").removeprefix("file://")}
    if file_format == "csv":
        sink["file_format"] = "csv"
    if partitions:
        sink["partition_columns"] = partitions
    return sink
