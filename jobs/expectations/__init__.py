"""Row-level expectations: a named Spark SQL condition every row should meet, on a stream's rows (after its
pre-processors, before the SQL) or on the SQL's result (after the post-processors), with what to do with a
row that does not meet it.

Everything runs inside the query, on the JVM: the violations of each expectation are counted with
`DataFrame.observe` (reported in every micro-batch's progress, under `EXPECTATIONS_METRIC.<stage>`), then
`fail` rows stop the query with an error naming the expectation, and `drop` rows are filtered out. A row
meets a condition only when it is true: NULL (a missing value) does not meet it.
"""
