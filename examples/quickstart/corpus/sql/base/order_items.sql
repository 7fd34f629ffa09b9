-- Base table: order lines, one row per product in an order, with quantity and unit price.
CREATE TABLE base.order_items AS
SELECT order_id, product_id, quantity, unit_price, quantity * unit_price AS line_amount
FROM raw.shop_order_lines;
