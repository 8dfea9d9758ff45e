-- The generator's topic: one JSON record per event. `event_type` says which of the three nested rows is
-- set (0 a person, 1 an auction, 2 a bid); the event time is that row's `dateTime`, and the watermark
-- trails it by 4 seconds.
CREATE TABLE kafka (
    event_type INT,
    person ROW<
        id BIGINT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR, city VARCHAR, state VARCHAR,
        `dateTime` TIMESTAMP(3), extra VARCHAR
    >,
    auction ROW<
        id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT,
        `dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra VARCHAR
    >,
    bid ROW<
        auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
        `dateTime` TIMESTAMP(3), extra VARCHAR
    >,
    `dateTime` AS CASE event_type
        WHEN 0 THEN person.`dateTime`
        WHEN 1 THEN auction.`dateTime`
        ELSE bid.`dateTime`
    END,
    WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH (
    'connector' = 'kafka',
    'topic' = '${NEXMARK_TOPIC}',
    'properties.bootstrap.servers' = '${BOOTSTRAP_SERVERS}',
    'properties.group.id' = 'nexmark',
    'scan.startup.mode' = 'earliest-offset',
    'format' = 'json'
);
