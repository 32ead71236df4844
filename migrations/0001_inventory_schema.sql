-- Holdfast inventory: the tables.
--
-- Capacity lives in `resources` as three counters. Availability is always
-- total - held - sold, read from the counters and never from a row count, and
-- a CHECK constraint makes an oversell impossible to commit whatever the code
-- above it does. Every change to the counters is made by the functions in
-- 0002 under one row lock per resource, taken in resource-id order.

-- Settings every process shares. One row, so a web server, a worker and a
-- psql session all decide with the same numbers.
create table inventory_settings (
    singleton        boolean primary key default true check (singleton),
    -- life of a plain hold (a basket that has not started paying)
    hold_ttl         interval not null default interval '15 minutes',
    -- life of a hold once payment has started; must outlive a plain hold, or
    -- the basket timer could kill a hold while the shopper is on the bank page
    payment_window   interval not null default interval '30 minutes',
    -- most units one account may hold at once; null means no cap
    account_cap      integer,
    -- whether the cap counts per resource or across all resources
    cap_scope        text not null default 'resource',
    -- how many times a plain hold may be extended, and by how much each time
    max_extensions   integer not null default 1,
    extension        interval not null default interval '5 minutes',
    updated_at       timestamptz not null default now(),

    constraint hold_ttl_positive check (hold_ttl > interval '0'),
    constraint payment_window_exceeds_ttl check (payment_window > hold_ttl),
    constraint account_cap_positive check (account_cap is null or account_cap > 0),
    constraint cap_scope_known check (cap_scope in ('resource', 'global')),
    constraint max_extensions_non_negative check (max_extensions >= 0),
    constraint extension_positive check (extension > interval '0')
);
insert into inventory_settings default values;

create table resources (
    id           text primary key,
    total        integer not null,
    held         integer not null default 0,
    sold         integer not null default 0,
    -- Hints that let the hot path skip work. next_expiry is never later than
    -- the earliest expires_at of a plain hold on this resource, next_deadline
    -- never later than the earliest payment_deadline of a paying hold; null
    -- means there is none. A hint may be early (then one scan corrects it)
    -- but is never late, so nothing due is ever missed.
    next_expiry  timestamptz,
    next_deadline timestamptz,
    created_at   timestamptz not null default now(),
    updated_at   timestamptz not null default now(),

    constraint resource_id_shape check (length(id) between 1 and 200),
    constraint total_non_negative check (total >= 0),
    constraint held_non_negative check (held >= 0),
    constraint sold_non_negative check (sold >= 0),
    -- the last word on overselling
    constraint no_oversell check (held + sold <= total)
);

-- A payment reference buys at most one purchase (a single hold or a basket).
-- The primary key is the unique index on payment references; holds point at
-- it with a composite foreign key, so even a hand-written UPDATE cannot give
-- one payment to two purchases.
create table payment_refs (
    payment_ref  text primary key,
    purchase_id  uuid not null,
    created_at   timestamptz not null default now(),
    constraint payment_ref_shape check (length(payment_ref) between 1 and 255),
    unique (payment_ref, purchase_id)
);

create table holds (
    id               uuid primary key default gen_random_uuid(),
    -- lines of one basket share a basket_id; a single hold has none
    basket_id        uuid,
    -- what the operations act on: the basket, or the hold on its own
    purchase_id      uuid generated always as (coalesce(basket_id, id)) stored,
    resource_id      text not null references resources (id),
    account_id       text not null,
    qty              integer not null,
    state            text not null default 'held',
    idempotency_key  text,
    payment_ref      text,
    created_at       timestamptz not null default now(),
    expires_at       timestamptz not null,
    payment_started_at timestamptz,
    payment_deadline timestamptz,
    confirmed_at     timestamptz,
    extensions       integer not null default 0,
    -- for released and expired holds: when, who (a sweeper's name, a staff
    -- member, 'shopper'), and why
    ended_at         timestamptz,
    ended_by         text,
    end_reason       text,

    constraint qty_positive check (qty > 0),
    constraint state_known check (state in ('held', 'awaiting_payment', 'confirmed', 'released', 'expired')),
    constraint account_id_shape check (length(account_id) between 1 and 200),
    constraint idempotency_key_shape check (idempotency_key is null or length(idempotency_key) between 1 and 255),
    constraint extensions_non_negative check (extensions >= 0),
    constraint paying_has_deadline check (state <> 'awaiting_payment' or payment_deadline is not null),
    constraint confirmed_has_payment check ((state = 'confirmed') = (payment_ref is not null)),
    constraint ended_says_who_and_why check (
        (state in ('released', 'expired')) = (ended_at is not null and ended_by is not null and end_reason is not null)
    ),
    constraint payment_ref_claimed foreign key (payment_ref, purchase_id)
        references payment_refs (payment_ref, purchase_id)
);

-- A retried hold with the same (resource, account, key) finds the original.
create unique index holds_idempotency on holds (resource_id, account_id, idempotency_key)
    where idempotency_key is not null;
-- One payment reference per hold row, as a plain partial unique index too:
-- the foreign key above extends this to whole baskets.
create unique index holds_payment_ref on holds (payment_ref, resource_id)
    where payment_ref is not null;
-- The operations find a purchase's lines by this.
create index holds_purchase on holds (purchase_id);
-- Expiry scans: only live rows are indexed, so the sweeper and the lazy path
-- walk what can still expire (plus dead entries until vacuum cleans them,
-- which is why the hot path consults the hints above first).
create index holds_due_plain on holds (resource_id, expires_at) where state = 'held';
create index holds_due_paying on holds (resource_id, payment_deadline) where state = 'awaiting_payment';
-- Account caps count an account's live holds.
create index holds_live_by_account on holds (account_id, resource_id)
    where state in ('held', 'awaiting_payment');
-- Staff listings by state and age.
create index holds_state_created on holds (state, created_at);

-- What a hold is for never changes after it is made: the functions read a
-- purchase's resources unlocked and then lock them, which is only safe
-- because these columns cannot move.
create function holds_lines_immutable() returns trigger
language plpgsql as $$
begin
    raise exception 'a hold''s resource, basket, account and qty never change'
        using errcode = 'restrict_violation';
end;
$$;
create trigger holds_lines_immutable
    before update of resource_id, basket_id, account_id, qty on holds
    for each row
    when (old.resource_id is distinct from new.resource_id
       or old.basket_id is distinct from new.basket_id
       or old.account_id is distinct from new.account_id
       or old.qty is distinct from new.qty)
    execute function holds_lines_immutable();

-- The history of every hold. Rows are only ever appended.
create table hold_events (
    id          bigint generated always as identity primary key,
    hold_id     uuid not null references holds (id),
    at          timestamptz not null default clock_timestamp(),
    kind        text not null,
    from_state  text,
    to_state    text not null,
    actor       text not null,
    detail      jsonb not null default '{}'::jsonb,
    constraint event_kind_known check (kind in ('held', 'payment_started', 'confirmed', 'released', 'expired', 'extended', 'repaired'))
);
create index hold_events_by_hold on hold_events (hold_id, id);

create function hold_events_append_only() returns trigger
language plpgsql as $$
begin
    raise exception 'hold_events is append-only (% refused)', tg_op
        using errcode = 'restrict_violation';
end;
$$;
create trigger hold_events_append_only
    before update or delete or truncate on hold_events
    for each statement execute function hold_events_append_only();
