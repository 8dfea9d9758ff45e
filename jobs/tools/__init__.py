"""Tools around the engine, not part of it: the embedded broker and the booking generator (`make run`, tests,
benchmarks), the Nexmark generator and oracle, the Flink rows the oracles share (`flink_rows`), the
protobuf compiler, PySpark's zipped bytecode and the driver JVM's class archive (`make`)."""
