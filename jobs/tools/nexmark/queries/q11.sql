-- q11, user sessions: how many bids each bidder placed in each of their sessions, a session ending
-- after 10 seconds without a bid.
CREATE TABLE nexmark_q11 (
    bidder BIGINT, bid_count BIGINT, starttime TIMESTAMP(3), endtime TIMESTAMP(3)
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q11
SELECT
    bidder,
    COUNT(*) AS bid_count,
    SESSION_START(`dateTime`, INTERVAL '10' SECOND) AS starttime,
    SESSION_END(`dateTime`, INTERVAL '10' SECOND) AS endtime
FROM bid
GROUP BY bidder, SESSION(`dateTime`, INTERVAL '10' SECOND);
