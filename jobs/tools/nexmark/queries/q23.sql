-- q23, bids with their bidder and the bidder's auctions: a join of three streams (bid to person by the
-- bidder, bid to auction by the bidder as seller).
CREATE TABLE nexmark_q23 (
    bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, bid_extra VARCHAR,
    person_id BIGINT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR, city VARCHAR, state VARCHAR,
    person_extra VARCHAR,
    itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT,
    auction_dateTime TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT,
    auction_extra VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q23
SELECT
    b.bidder, b.price, b.channel, b.url, b.extra AS bid_extra,
    p.id AS person_id, p.name, p.emailAddress, p.creditCard, p.city, p.state, p.extra AS person_extra,
    a.itemName, a.description, a.initialBid, a.reserve, a.`dateTime` AS auction_dateTime, a.expires,
    a.seller, a.category, a.extra AS auction_extra
FROM bid AS b
JOIN person AS p ON p.id = b.bidder
JOIN auction AS a ON a.seller = b.bidder;
