-- The CRM table the example looks customers up in, with a few customers (c-eve is not among them: her
-- orders go out with an empty name and tier 0).
CREATE TABLE customers (
    customer_id text PRIMARY KEY,
    name        text NOT NULL,
    tier        int  NOT NULL
);

INSERT INTO customers (customer_id, name, tier) VALUES
    ('c-ada', 'Ada Lovelace', 3),
    ('c-bob', 'Bob Marley', 1),
    ('c-cyd', 'Cyd Charisse', 2),
    ('c-dan', 'Dan Brown', 1);
