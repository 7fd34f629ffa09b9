-- refunds: money returned to customers for cancelled or returned orders.
CREATE TABLE finance.refunds AS
SELECT refund_id, payment_id, order_id, amount, reason, refunded_at
FROM raw.psp_refunds;
