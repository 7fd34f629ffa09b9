-- customer_lifetime_value: total spend, order count and first/last order per customer.
CREATE TABLE analytics.customer_lifetime_value AS
SELECT customer_id, COUNT(*) AS orders, SUM(total_amount) AS lifetime_value,
       MIN(order_date) AS first_order, MAX(order_date) AS last_order
FROM analytics.customer_orders
GROUP BY customer_id;
