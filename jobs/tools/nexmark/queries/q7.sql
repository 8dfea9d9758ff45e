-- q7, highest bid: the bids at the highest price of their 10-second tumbling window, found by joining
-- each bid with the windows' maxima.
CREATE TABLE nexmark_q7 (
    auction BIGINT, bidder BIGINT, price BIGINT, `dateTime` TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q7
SELECT b.auction, b.price, b.bidder, b.`dateTime`, b.extra
FROM bid AS b
JOIN (
    SELECT MAX(price) AS maxprice, window_end AS `dateTime`
    FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
    GROUP BY window_start, window_end
) AS top
ON b.price = top.maxprice
WHERE b.`dateTime` BETWEEN top.`dateTime` - INTERVAL '10' SECOND AND top.`dateTime`;
