-- revenue_recognition: recognised revenue per month from captured payments, net of refunds.
CREATE TABLE finance.revenue_recognition AS
SELECT DATE_TRUNC('month', p.captured_at) AS month, SUM(p.amount) - COALESCE(SUM(r.amount), 0) AS net_revenue
FROM base.payments p
LEFT JOIN finance.refunds r ON r.payment_id = p.payment_id
GROUP BY 1;
