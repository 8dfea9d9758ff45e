-- q5, hot items: in every 10-second window sliding by 2 seconds, the auctions with the most bids
-- (each window's counts joined with the window's largest count).
CREATE TABLE nexmark_q5 (auction BIGINT, num BIGINT) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q5
SELECT counts.auction, counts.num
FROM (
    SELECT auction, COUNT(*) AS num, window_start AS starttime, window_end AS endtime
    FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
    GROUP BY auction, window_start, window_end
) AS counts
JOIN (
    SELECT MAX(per_auction.num) AS maxn, per_auction.starttime, per_auction.endtime
    FROM (
        SELECT COUNT(*) AS num, window_start AS starttime, window_end AS endtime
        FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
        GROUP BY auction, window_start, window_end
    ) AS per_auction
    GROUP BY per_auction.starttime, per_auction.endtime
) AS top
ON counts.starttime = top.starttime AND counts.endtime = top.endtime AND counts.num >= top.maxn;
