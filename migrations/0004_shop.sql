-- Holdfast shop: what is sold, who is buying, and what must happen after a
-- commit. Capacity stays in `resources`; nothing here counts units.

-- A product is something a shopper can put in a basket. It points at the
-- resource whose capacity it uses (a pickup slot, a ticket tier, a stock).
create table products (
    id           text primary key,
    resource_id  text not null references resources (id),
    kind         text not null,
    name         text not null,
    description  text not null default '',
    -- in the currency's minor unit (cents, paise)
    price_minor  bigint not null,
    currency     text not null,
    -- when the slot or the event happens, for the pages
    starts_at    timestamptz,
    -- groups products on one page: a bakery's slots, an event's tiers
    collection   text not null,
    position     integer not null default 0,
    active       boolean not null default true,

    constraint product_id_shape check (length(id) between 1 and 200),
    constraint product_kind_known check (kind in ('pickup_slot', 'ticket', 'stock')),
    constraint product_price_non_negative check (price_minor >= 0),
    constraint product_currency_iso check (currency ~ '^[a-z]{3}$')
);
create index products_collection on products (collection, position, id);

-- An order is one checkout: its lines, its hold (a basket in the engine)
-- and its payment at the provider.
create table orders (
    id                  uuid primary key default gen_random_uuid(),
    -- the order page's link; never guessable, never the id
    token               text not null unique,
    -- the checkout form's one-time key: a double submit finds this order
    checkout_key        text not null unique,
    state               text not null default 'pending',
    customer_name       text not null,
    customer_email      text not null,
    currency            text not null,
    amount_minor        bigint not null,
    -- the engine's purchase id (the basket hold)
    hold_id             uuid,
    provider            text not null,
    provider_session_id text unique,
    provider_url        text,
    provider_expires_at timestamptz,
    -- the provider's id of the payment that paid this order
    payment_ref         text,
    -- set when staff must look (payment_ref_in_use)
    flag                text,
    pickup_code         text,
    created_at          timestamptz not null default now(),
    paid_at             timestamptz,
    updated_at          timestamptz not null default now(),

    constraint order_state_known check (state in ('pending', 'paid', 'expired', 'cancelled', 'refund_pending', 'refunded')),
    constraint order_provider_known check (provider in ('stripe', 'razorpay')),
    constraint order_amount_non_negative check (amount_minor >= 0),
    constraint order_currency_iso check (currency ~ '^[a-z]{3}$'),
    constraint order_customer_shape check (length(customer_name) between 1 and 200 and length(customer_email) between 3 and 254),
    constraint paid_order_has_payment check (state <> 'paid' or (payment_ref is not null and paid_at is not null))
);
create index orders_state_created on orders (state, created_at);

create table order_lines (
    order_id          uuid not null references orders (id),
    product_id        text not null references products (id),
    name              text not null,
    qty               integer not null check (qty > 0),
    unit_price_minor  bigint not null check (unit_price_minor >= 0),
    primary key (order_id, product_id)
);

-- Ticket codes, one per unit of a ticket line.
create table order_codes (
    code        text primary key,
    order_id    uuid not null references orders (id),
    product_id  text not null references products (id),
    created_at  timestamptz not null default now()
);
create index order_codes_by_order on order_codes (order_id);

-- Each provider event is processed once: this row is written in the same
-- transaction as the event's effect.
create table webhook_events (
    provider     text not null,
    event_id     text not null,
    event_type   text not null,
    received_at  timestamptz not null default now(),
    primary key (provider, event_id)
);

-- Work that must happen after a commit (refunds, messages), taken by
-- workers with FOR UPDATE SKIP LOCKED, retried with backoff, never dropped.
create table outbox_jobs (
    id            bigint generated always as identity primary key,
    kind          text not null,
    -- one job per effect: a refund of one payment is queued once
    dedupe_key    text not null unique,
    payload       jsonb not null,
    state         text not null default 'pending',
    attempts      integer not null default 0,
    last_error    text,
    run_after     timestamptz not null default now(),
    created_at    timestamptz not null default now(),
    done_at       timestamptz,

    constraint job_kind_known check (kind in ('refund', 'order_confirmation', 'expire_session')),
    constraint job_state_known check (state in ('pending', 'done')),
    constraint done_job_has_time check ((state = 'done') = (done_at is not null))
);
create index outbox_due on outbox_jobs (run_after) where state = 'pending';

-- A shopper's basket, identified by a random cookie. Holding happens at
-- checkout start, not here: a basket line reserves nothing.
create table basket_lines (
    basket_id   text not null,
    product_id  text not null references products (id),
    qty         integer not null check (qty between 1 and 100),
    added_at    timestamptz not null default now(),
    primary key (basket_id, product_id),
    constraint basket_id_shape check (length(basket_id) between 16 and 128)
);
