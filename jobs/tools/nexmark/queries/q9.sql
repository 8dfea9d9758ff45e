-- q9, winning bids: each auction with its winning bid, the highest placed while it was open (the
-- earliest of equal prices). A Top-1 per auction over a join.
CREATE TABLE nexmark_q9 (
    id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT,
    `dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra VARCHAR,
    auction BIGINT, bidder BIGINT, price BIGINT, bid_dateTime TIMESTAMP(3), bid_extra VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q9
SELECT
    id, itemName, description, initialBid, reserve, `dateTime`, expires, seller, category, extra,
    auction, bidder, price, bid_dateTime, bid_extra
FROM (
    SELECT
        a.*, b.auction, b.bidder, b.price, b.`dateTime` AS bid_dateTime, b.extra AS bid_extra,
        ROW_NUMBER() OVER (PARTITION BY a.id ORDER BY b.price DESC, b.`dateTime` ASC) AS rownum
    FROM auction AS a, bid AS b
    WHERE a.id = b.auction AND b.`dateTime` BETWEEN a.`dateTime` AND a.expires
)
WHERE rownum <= 1;
