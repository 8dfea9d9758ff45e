-- q6, average selling price by seller: the winning bids (highest price while the auction was open) of
-- each seller's last 10 closed auctions, averaged. Flink cannot run it (FLINK-19059: an OVER
-- aggregation over the updating result of a Top-1).
CREATE TABLE nexmark_q6 (seller VARCHAR, avg_price BIGINT) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q6
SELECT
    winners.seller,
    AVG(winners.price) OVER (
        PARTITION BY winners.seller ORDER BY winners.`dateTime`
        ROWS BETWEEN 10 PRECEDING AND CURRENT ROW
    )
FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY a.id, a.seller ORDER BY b.price DESC) AS rownum
    FROM (
        SELECT a.id, a.seller, b.price, b.`dateTime`
        FROM auction AS a, bid AS b
        WHERE a.id = b.auction AND b.`dateTime` BETWEEN a.`dateTime` AND a.expires
    )
    WHERE rownum <= 1
) AS winners;
