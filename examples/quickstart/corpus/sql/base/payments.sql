-- Base table: card and wallet payments captured by the payment provider.
CREATE TABLE base.payments AS
SELECT payment_id, order_id, payment_method, amount, captured_at
FROM raw.psp_transactions
WHERE state = 'captured';
