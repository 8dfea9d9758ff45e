-- q20, expanded bids: the bids on auctions of category 10, each with its auction's columns.
CREATE TABLE nexmark_q20 (
    auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, bid_dateTime TIMESTAMP(3),
    bid_extra VARCHAR,
    itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT,
    auction_dateTime TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT,
    auction_extra VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q20
SELECT
    auction, bidder, price, channel, url, b.`dateTime`, b.extra,
    itemName, description, initialBid, reserve, a.`dateTime`, expires, seller, category, a.extra
FROM bid AS b
JOIN auction AS a ON b.auction = a.id
WHERE a.category = 10;
