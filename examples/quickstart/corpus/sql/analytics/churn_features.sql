-- churn_features: days since last order and order frequency, inputs to the churn model.
CREATE TABLE analytics.churn_features AS
SELECT customer_id, CURRENT_DATE - last_order AS days_since_last_order,
       orders / GREATEST(1, (last_order - first_order) / 30) AS orders_per_month
FROM analytics.customer_lifetime_value;
