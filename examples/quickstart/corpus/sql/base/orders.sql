-- Base table: one row per customer order, loaded nightly from the shop database.
CREATE TABLE base.orders AS
SELECT order_id, customer_id, order_date, status, total_amount, currency
FROM raw.shop_orders
WHERE status <> 'test';
