-- Ways to pay (issue 33): the shopper chooses a way (a card, UPI, net
-- banking, SEPA Direct Debit), not a company; the owner decides on the
-- Settings page which provider serves each (`provider` null: not
-- offered). A way the owner never set is served by the first provider
-- with keys that takes it in the shop's currency (src/payments/methods.rs).
create table pay_methods (
    method      text not null primary key,
    provider    text,
    updated_at  timestamptz not null default now(),
    constraint pay_method_known check (method in ('card', 'upi', 'netbanking', 'sepa_debit')),
    constraint pay_method_provider_known check (provider in ('razorpay', 'stripe'))
);
