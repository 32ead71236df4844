-- Live providers: what was paid is checked, not assumed.

-- Signed payments for pages Holdfast does not know (another system on the
-- same account, a payment link, a test): kept for staff, never dropped.
create table orphan_payments (
    provider      text not null,
    payment_ref   text not null,
    -- the page it was made on, if any
    page_id       text,
    amount_minor  bigint not null,
    currency      text not null,
    -- as the provider last reported it (captured, authorized, …)
    status        text not null,
    -- the order the payment claimed to be for, if it claimed one
    order_hint    uuid,
    -- which path brought it (webhook event id, reconciliation)
    seen_in       text not null,
    first_seen_at timestamptz not null default now(),
    last_seen_at  timestamptz not null default now(),
    primary key (provider, payment_ref),

    constraint orphan_provider_known check (provider in ('stripe', 'razorpay')),
    constraint orphan_shape check (length(payment_ref) between 1 and 255
                                   and length(currency) between 1 and 10
                                   and length(seen_in) <= 300)
);
create index orphan_payments_recent on orphan_payments (last_seen_at desc);

-- An authorised payment is captured by the worker, outside any lock.
alter table outbox_jobs drop constraint job_kind_known;
alter table outbox_jobs add constraint job_kind_known
    check (kind in ('refund', 'order_confirmation', 'expire_session', 'capture_payment'));

-- Closing a page names its provider now; every such job so far was Stripe's.
update outbox_jobs
   set payload = payload || jsonb_build_object('provider', 'stripe')
 where kind = 'expire_session' and not payload ? 'provider';
