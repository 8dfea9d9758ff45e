-- q3, local item suggestion: sellers in Oregon, Idaho or California with an auction in category 10
-- (a regular join of two streams, each side kept in state).
CREATE TABLE nexmark_q3 (
    name VARCHAR, city VARCHAR, state VARCHAR, id BIGINT
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q3
SELECT p.name, p.city, p.state, a.id
FROM auction AS a
JOIN person AS p ON a.seller = p.id
WHERE a.category = 10 AND p.state IN ('OR', 'ID', 'CA');
