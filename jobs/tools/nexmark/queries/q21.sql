-- q21, channel ids: each bid through a known channel or with a channel id in its url, with the id
-- (the four hot channels have fixed ones).
CREATE TABLE nexmark_q21 (
    auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, channel_id VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q21
SELECT
    auction, bidder, price, channel,
    CASE LOWER(channel)
        WHEN 'apple' THEN '0'
        WHEN 'google' THEN '1'
        WHEN 'facebook' THEN '2'
        WHEN 'baidu' THEN '3'
        ELSE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)
    END AS channel_id
FROM bid
WHERE LOWER(channel) IN ('apple', 'google', 'facebook', 'baidu')
   OR REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2) IS NOT NULL;
