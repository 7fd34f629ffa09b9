-- Base table: customer master data with signup date, country and marketing consent.
CREATE TABLE base.customers AS
SELECT customer_id, email, country, signup_date, marketing_opt_in
FROM raw.crm_contacts;
