# Two commands do all the set-up on a fresh machine: `make run` and `make test`.
# The virtualenv is (re)built only when pyproject.toml changes; protos are recompiled when they change.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# uv (from PyPI) installs into the virtualenv: parallel downloads, about half pip's time for the same set.
# It compiles the bytecode as pip does: with $PYTHONDONTWRITEBYTECODE set, nothing else would, and every
# Python process (Spark's workers, Dagster's, the CLI) would compile what it imports again at each start.
UV_INSTALL := uv pip install --quiet --compile-bytecode
UV := $(BIN)/$(UV_INSTALL) --python $(BIN)/python
# `make run` installs what running needs: the project (and, below, the Apache Kafka node its demo runs on).
RUN_STAMP := $(VENV)/.installed-run
# `make test` (and lint, bench) add the dev extra: test, docs and lint tools, and the test servers.
STAMP := $(VENV)/.installed
# The browser test drives Debian's Chromium with playwright-core (npm); neither downloads a browser.
UI_STAMP := tests/ui/node_modules/.installed
# The InfluxDB sink tests run Debian's InfluxDB 1.6 server, installed when missing.
INFLUXD := /usr/bin/influxd
# The driver JVM's class-data-sharing archive (jobs/tools/jvm_archive.py): `--if-stale` makes it again
# whenever it does not fit a driver's class path (a rebuilt virtualenv or project jar, the s3a connector
# resolved since), whatever order the targets ran in.
JVM_ARCHIVE := $(BIN)/python -m jobs.tools.jvm_archive --if-stale
# The packed environment a Spark cluster's executors get (jobs/tools/pack_environment.py): the project, not
# editable, with its runtime dependencies but pyspark; made again when the code or the virtualenv changes.
SHIP_ARCHIVE := build/ship/dagger-env.tar.gz
SHIP_SOURCES := pyproject.toml $(shell find jobs resources dagger_assets -name '*.py' -not -path '*/__pycache__/*')
# Apache Kafka, the broker `make run`'s demo and the tests run on: its classpath, resolved by Maven from Maven
# Central (jobs/tools/broker.py starts a single KRaft node from it).
KAFKA_POM := jobs/tools/apache_kafka/pom.xml
KAFKA_STAMP := build/kafka/.resolved
# The s3a:// connector (hadoop-aws and its AWS SDK bundle, for checkpoints and the lake on S3), resolved by
# Maven from Maven Central into build/connectors/s3a/libs; jobs/engine/spark.py puts it on the class path when there.
S3A_POM := jobs/connectors/s3a/pom.xml
S3A_STAMP := build/connectors/s3a/.resolved
# Elasticsearch for the sink and enrichment tests: Elastic's integ-test-zip distributions (8.15, and 7.17 for a
# few tests) from Maven Central, unpacked into build/elasticsearch/<version> (tests/servers/elasticsearch.py).
ELASTICSEARCH_POM := tests/servers/elasticsearch_dist/pom.xml
ELASTICSEARCH_STAMP := build/elasticsearch/.unpacked
# Apicurio Registry for the Avro stream tests: its server build (a Quarkus runner jar and its libraries) from
# Maven Central (tests/servers/apicurio.py).
APICURIO_VERSION := 3.0.9
APICURIO_STAMP := build/apicurio/.unpacked
# The Postgres tests start a throwaway cluster of Debian 12's PostgreSQL 15, installed when missing.
POSTGRES := /usr/lib/postgresql/15/bin/postgres
# The metrics tests scrape a running dagger with Debian's Prometheus and check the alert rules with promtool.
PROMETHEUS := /usr/bin/prometheus
# Apache Flink, the oracle the tests compare query results with (tests/flink/): PyFlink in a virtualenv
# of its own, as its pins (numpy, pyarrow, protobuf) differ from the project's.
FLINK_VENV := build/flink-venv
FLINK_STAMP := $(FLINK_VENV)/.installed
# Flink's side of the benchmark suite (bench/flink/): its Kafka connector, protobuf format and protoc, resolved
# by Maven from Maven Central; the tests need the Kafka connector too (the Nexmark oracle's Flink reads Kafka).
FLINK_BENCH_POM := bench/flink/pom.xml
FLINK_BENCH_STAMP := build/flink-bench/.resolved
# The test set-up runs in parallel lanes (`test-setup`): downloads, installs and builds overlap. Two kinds of
# step must still take turns: Maven's, which share one local repository (~/.m2), and apt's, which share
# dpkg's database; each takes its lock, so the steps of one kind run one after the other.
SETUP_JOBS := 4
LOCKS := build/.locks
MAVEN_TURN := mkdir -p $(LOCKS) && flock $(LOCKS)/maven
APT_TURN := mkdir -p $(LOCKS) && flock $(LOCKS)/apt
# A download cut mid-way (seen: "Connection reset" on the AWS SDK bundle, 600 MB) is tried again, twice.
RETRIED := sh -c 'for attempt in 1 2 3; do "$$@" && exit 0; echo "failed, trying again: $$*" >&2; sleep 10; done; exit 1' retried
APT_INSTALL := $(APT_TURN) sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$$@"' apt

# Everything the tests talk to, and what they read from the build.
TEST_SETUP := $(STAMP) $(UI_STAMP) $(INFLUXD) $(POSTGRES) $(PROMETHEUS) $(KAFKA_STAMP) $(APICURIO_STAMP) \
	$(ELASTICSEARCH_STAMP) $(FLINK_STAMP) $(FLINK_BENCH_STAMP) protos jvm $(S3A_STAMP) jvm-archive $(SHIP_ARCHIVE)
PYTEST := $(BIN)/python -m pytest --numprocesses 3 --dist loadfile --no-loadscope-reorder

.PHONY: run test test-setup test-prerequisites soak lint bench nexmark protos jvm s3a jvm-archive clean

# The class archive only saves the driver a few seconds of start-up and takes a minute to make: a first
# run starts without it, and makes it in the background, at low priority, for the runs after.
run: $(RUN_STAMP) protos jvm $(KAFKA_STAMP)
	$(JVM_ARCHIVE) --background
	$(BIN)/python -m jobs demo

# Every claim proven once (docs/operations.md, "Which run proves what").
test: test-setup
	$(PYTEST)

# Everything `test` and `soak` need, made SETUP_JOBS steps at a time (a fresh machine spends minutes here,
# mostly waiting on downloads); each step's output is printed whole when it ends.
test-setup:
	$(MAKE) --no-print-directory --jobs=$(SETUP_JOBS) --output-sync=target test-prerequisites

test-prerequisites: $(TEST_SETUP)

# The long proofs: the crash harnesses' many kills, the whole demand scenario and browser flows; writes
# docs/soak-report.md.
soak: test-setup
	$(PYTEST) --soak

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

# The suite last: its table (also written into docs/benchmarks.md) is the last thing printed.
bench: $(STAMP) $(INFLUXD) protos jvm-archive $(KAFKA_STAMP) $(ELASTICSEARCH_STAMP) $(FLINK_STAMP) \
		$(FLINK_BENCH_STAMP) $(SHIP_ARCHIVE)
	for sink in kafka_parquet influx elasticsearch bigquery; do $(BIN)/python bench/sink_$$sink.py || exit 1; done
	$(BIN)/python bench/nexmark.py --publish
	$(BIN)/python bench/suite.py --publish

# Nexmark's throughput per core on Flink and as daggers, every query, on the same Kafka events
# (bench/nexmark.py; NEXMARK_ARGS="--events 200000 --only q0,q7" for a part of it).
nexmark: $(STAMP) protos jvm-archive $(KAFKA_STAMP) $(FLINK_STAMP) $(FLINK_BENCH_STAMP)
	$(BIN)/python bench/nexmark.py $(NEXMARK_ARGS)

protos: $(RUN_STAMP)
	$(BIN)/python -m jobs.tools.protoc

# The project's JVM side (the Maven module jvm/, built into build/jvm): its jar, its JUnit tests, and the
# connectors Spark does not bundle. Maven runs only when the jar is older than the pom or a .java of jvm/src.
jvm: $(RUN_STAMP)
	$(MAVEN_TURN) $(BIN)/python -m jobs.engine.jvm

# The archive fits one class path: in the test set-up, the one with the s3a connector (an archive made
# before its jars were there would be made again at the next command).
jvm-archive: $(RUN_STAMP) jvm $(KAFKA_STAMP) $(if $(filter test-prerequisites,$(MAKECMDGOALS)),$(S3A_STAMP))
	$(JVM_ARCHIVE)

# `--if-stale`: make's timestamps aside, the archive's manifest says whether it already holds this code.
$(SHIP_ARCHIVE): $(STAMP) $(SHIP_SOURCES)
	$(BIN)/python -m jobs.tools.pack_environment --if-stale
	touch $@

$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv
	$(UV) -e .
	$(BIN)/python -m jobs.tools.pyspark_bytecode
	touch $@

$(STAMP): $(RUN_STAMP)
	$(UV) -e '.[dev]'
	touch $@

$(UI_STAMP): tests/ui/package.json tests/ui/package-lock.json
	test -x /usr/bin/chromium || ($(APT_INSTALL) chromium chromium-driver)
	cd tests/ui && npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(INFLUXD):
	$(APT_INSTALL) influxdb influxdb-client

$(PROMETHEUS):
	$(APT_INSTALL) prometheus

# The server binaries only; the tests run their own cluster (tests/servers/postgres.py), never the package's.
$(POSTGRES):
	$(APT_INSTALL) postgresql

$(KAFKA_STAMP): $(KAFKA_POM)
	rm -rf build/kafka/libs
	$(MAVEN_TURN) $(RETRIED) mvn --batch-mode --quiet -f $(KAFKA_POM) dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory=$(CURDIR)/build/kafka/libs
	touch $@

s3a: $(S3A_STAMP)

$(S3A_STAMP): $(S3A_POM)
	rm -rf build/connectors/s3a/libs
	$(MAVEN_TURN) $(RETRIED) mvn --batch-mode --quiet -f $(S3A_POM) dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory=$(CURDIR)/build/connectors/s3a/libs
	touch $@

$(APICURIO_STAMP):
	rm -rf build/apicurio && mkdir -p build/apicurio
	$(MAVEN_TURN) $(RETRIED) mvn --batch-mode --quiet dependency:copy \
		-Dartifact=io.apicurio:apicurio-registry-app:$(APICURIO_VERSION):tar.gz:all -DoutputDirectory=$(CURDIR)/build
	tar xzf build/apicurio-registry-app-$(APICURIO_VERSION)-all.tar.gz -C build/apicurio
	rm build/apicurio-registry-app-$(APICURIO_VERSION)-all.tar.gz
	touch $@

$(ELASTICSEARCH_STAMP): $(ELASTICSEARCH_POM)
	rm -rf build/elasticsearch
	$(MAVEN_TURN) $(RETRIED) mvn --batch-mode --quiet -f $(ELASTICSEARCH_POM) dependency:unpack@unpack \
		-Delasticsearch.build=$(CURDIR)/build/elasticsearch
	touch $@

$(FLINK_BENCH_STAMP): $(FLINK_BENCH_POM)
	rm -rf build/flink-bench/libs
	$(MAVEN_TURN) $(RETRIED) mvn --batch-mode --quiet -f $(FLINK_BENCH_POM) dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory=$(CURDIR)/build/flink-bench/libs
	touch $@

$(FLINK_STAMP): tests/flink/requirements.txt $(RUN_STAMP)
	test -x $(FLINK_VENV)/bin/python || $(PYTHON) -m venv $(FLINK_VENV)
	$(BIN)/$(UV_INSTALL) --python $(FLINK_VENV)/bin/python -r tests/flink/requirements.txt
	touch $@

clean:
	rm -rf build .dagger .pytest_cache test-artifacts
