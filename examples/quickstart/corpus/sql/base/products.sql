-- Base table: product catalogue with category, brand and list price.
CREATE TABLE base.products AS
SELECT product_id, sku, product_name, category, brand, list_price
FROM raw.catalogue_items
WHERE is_archived = FALSE;
