-- q13, bounded side input: each bid joined, as of its processing time, with the row of a side table
-- whose key is the bid's auction modulo 10,000.
CREATE TABLE side_input (
    key BIGINT,
    `value` VARCHAR
) WITH (
    'connector.type' = 'filesystem',
    'connector.path' = 'file://${NEXMARK_DIR}/side_input.txt',
    'format.type' = 'csv'
);

CREATE TABLE nexmark_q13 (
    auction BIGINT, bidder BIGINT, price BIGINT, `dateTime` TIMESTAMP(3), `value` VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q13
SELECT b.auction, b.bidder, b.price, b.`dateTime`, s.`value`
FROM (SELECT *, PROCTIME() AS p_time FROM bid) AS b
JOIN side_input FOR SYSTEM_TIME AS OF b.p_time AS s
ON MOD(b.auction, 10000) = s.key;
