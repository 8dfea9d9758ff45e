-- q12, processing-time windows: each bidder's bids per 10-second tumbling window of processing time.
CREATE TABLE nexmark_q12 (
    bidder BIGINT, bid_count BIGINT, starttime TIMESTAMP(3), endtime TIMESTAMP(3)
) WITH ('connector' = 'blackhole');

CREATE VIEW bid_now AS SELECT *, PROCTIME() AS p_time FROM bid;

INSERT INTO nexmark_q12
SELECT bidder, COUNT(*) AS bid_count, window_start AS starttime, window_end AS endtime
FROM TABLE(TUMBLE(TABLE bid_now, DESCRIPTOR(p_time), INTERVAL '10' SECOND))
GROUP BY bidder, window_start, window_end;
