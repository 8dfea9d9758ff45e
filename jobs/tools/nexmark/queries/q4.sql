-- q4, average price per category: each auction's winning bid (the highest bid placed while it was
-- open), averaged over the auctions of a category. An aggregation over an aggregation over a join.
CREATE TABLE nexmark_q4 (id BIGINT, final BIGINT) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q4
SELECT winners.category, AVG(winners.final)
FROM (
    SELECT a.id, a.category, MAX(b.price) AS final
    FROM auction AS a
    JOIN bid AS b ON a.id = b.auction
    WHERE b.`dateTime` BETWEEN a.`dateTime` AND a.expires
    GROUP BY a.id, a.category
) AS winners
GROUP BY winners.category;
