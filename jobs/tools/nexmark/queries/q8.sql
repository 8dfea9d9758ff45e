-- q8, monitor new users: the persons who opened an auction in the same 10-second tumbling window in
-- which they joined (a join of two windowed results on the window).
CREATE TABLE nexmark_q8 (id BIGINT, name VARCHAR, stime TIMESTAMP(3)) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q8
SELECT p.id, p.name, p.starttime
FROM (
    SELECT id, name, window_start AS starttime, window_end AS endtime
    FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
    GROUP BY id, name, window_start, window_end
) AS p
JOIN (
    SELECT seller, window_start AS starttime, window_end AS endtime
    FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
    GROUP BY seller, window_start, window_end
) AS a
ON p.id = a.seller AND p.starttime = a.starttime AND p.endtime = a.endtime;
