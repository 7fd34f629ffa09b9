-- product_sales: revenue and units sold per product category and day.
CREATE TABLE analytics.product_sales AS
SELECT p.category, o.order_date, SUM(i.quantity) AS units, SUM(i.line_amount) AS revenue
FROM base.order_items i
JOIN base.products p ON p.product_id = i.product_id
JOIN base.orders o ON o.order_id = i.order_id
GROUP BY p.category, o.order_date;
