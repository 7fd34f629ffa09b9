-- currency_conversion: order amounts converted to EUR with the daily ECB exchange rate.
CREATE TABLE finance.orders_eur AS
SELECT o.order_id, o.total_amount * fx.rate_to_eur AS amount_eur
FROM base.orders o
JOIN raw.ecb_daily_rates fx ON fx.currency = o.currency AND fx.rate_date = o.order_date;
