-- customer_orders: every order enriched with the customer's country and signup cohort.
CREATE TABLE analytics.customer_orders AS
SELECT o.order_id, o.order_date, o.total_amount, c.customer_id, c.country,
       DATE_TRUNC('month', c.signup_date) AS signup_cohort
FROM base.orders o
JOIN base.customers c ON c.customer_id = o.customer_id;
