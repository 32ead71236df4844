-- The way the shopper chose to pay, kept on the order (issue 33): the pay
-- page hands it to a provider whose embedded checkout shows every way it
-- takes unless told (Razorpay's Checkout `config.display`). Null: none was
-- chosen (an older storefront naming a provider, an order of nothing).
alter table orders add column pay_method text;
alter table orders add constraint order_pay_method_known
    check (pay_method in ('card', 'upi', 'netbanking', 'sepa_debit'));
