-- After the sale: codes redeemed exactly once, and staff refunds of paid
-- orders (whole or some units) that put units back on sale in the same
-- transaction as the refund is queued.

-------------------------------------------------------------------------------
-- redemption
-------------------------------------------------------------------------------

-- A pickup code names one order: redemption finds the order by it. Codes
-- were drawn without a uniqueness rule before this migration, so a shop
-- with many orders may hold two alike: then the index is a plain one, new
-- codes are still drawn unused (checkout's fulfil), and redemption calls a
-- code two orders share not valid (staff look the order up instead).
do $$
begin
    if exists (select 1 from orders where pickup_code is not null
                group by pickup_code having count(*) > 1) then
        raise warning 'pickup codes shared by two orders exist: the pickup code index is not unique';
        create index orders_pickup_code on orders (pickup_code) where pickup_code is not null;
    else
        create unique index orders_pickup_code on orders (pickup_code) where pickup_code is not null;
    end if;
end;
$$;

-- One row per redeemed code. The primary key is the exactly-once: two doors
-- scanning one code at one moment both try to insert it, and one wins.
create table redemptions (
    code         text primary key,
    order_id     uuid not null references orders (id),
    kind         text not null,
    redeemed_at  timestamptz not null default clock_timestamp(),
    -- who: a staff member's e-mail, or the command line's user
    redeemed_by  text not null,
    -- where: the door or counter, as staff named it
    place        text not null default '',
    -- a refund of a redeemed unit needs a recorded override; the
    -- redemption itself stays (what happened at the door happened)
    constraint redemption_kind_known check (kind in ('ticket', 'pickup')),
    constraint redemption_by_shape check (length(redeemed_by) between 1 and 254),
    constraint redemption_place_shape check (length(place) <= 100)
);
create index redemptions_by_order on redemptions (order_id);

create function redemptions_append_only() returns trigger
language plpgsql as $$
begin
    raise exception 'redemptions are append-only (% refused)', tg_op
        using errcode = 'restrict_violation';
end;
$$;
create trigger redemptions_append_only
    before update or delete or truncate on redemptions
    for each statement execute function redemptions_append_only();

-------------------------------------------------------------------------------
-- what was refunded, per order, line, code and hold
-------------------------------------------------------------------------------

-- The sum refunded never exceeds what was paid: the database's word, not
-- only the page's. Every staff refund adds to it under the order's lock.
alter table orders
    add column refunded_minor bigint not null default 0,
    add constraint order_refunded_within_paid
        check (refunded_minor >= 0 and refunded_minor <= amount_minor);

alter table order_lines
    add column refunded_qty integer not null default 0,
    add constraint line_refunded_within_qty check (refunded_qty between 0 and qty);

-- A refunded ticket's code stops being redeemable.
alter table order_codes add column refunded_at timestamptz;

-- Units of a sold hold given back by a refund. `sold` counts
-- qty - returned of confirmed holds; qty itself never changes.
alter table holds
    add column returned integer not null default 0,
    add constraint returned_within_qty check (returned between 0 and qty),
    add constraint returned_only_when_sold check (returned = 0 or state = 'confirmed');

alter table hold_events drop constraint event_kind_known;
alter table hold_events add constraint event_kind_known
    check (kind in ('held', 'payment_started', 'confirmed', 'released', 'expired', 'extended',
                    'repaired', 'returned'));

-- Each staff refund, append-only: who, why, how much, which units, whether
-- they went back on sale, and whether a redeemed unit was overridden.
create table order_refunds (
    id                 bigint generated always as identity primary key,
    order_id           uuid not null references orders (id),
    amount_minor       bigint not null,
    -- [{"product_id": …, "qty": n, "codes": [...]}]
    units              jsonb not null,
    reason             text not null,
    restocked          boolean not null,
    override_redeemed  boolean not null default false,
    refunded_by        text not null,
    -- the form's (or the command's) one-time key: a double submit is one
    -- refund
    request_key        text unique,
    created_at         timestamptz not null default now(),
    -- free units (a price of 0) are refunded for nothing
    constraint order_refund_not_negative check (amount_minor >= 0),
    constraint order_refund_key_shape check (request_key is null or request_key ~ '^[A-Za-z0-9_-]{16,64}$'),
    constraint order_refund_reason_shape check (length(reason) between 1 and 500),
    constraint order_refund_by_shape check (length(refunded_by) between 1 and 254)
);
create index order_refunds_by_order on order_refunds (order_id, id);

create function order_refunds_append_only() returns trigger
language plpgsql as $$
begin
    raise exception 'order_refunds are append-only (% refused)', tg_op
        using errcode = 'restrict_violation';
end;
$$;
create trigger order_refunds_append_only
    before update or delete or truncate on order_refunds
    for each statement execute function order_refunds_append_only();

-- the shopper is told of a staff refund by mail
alter table outbox_jobs drop constraint job_kind_known;
alter table outbox_jobs add constraint job_kind_known
    check (kind in ('refund', 'order_confirmation', 'expire_session', 'capture_payment',
                    'refund_notice', 'payment_returned'));

alter table staff_actions drop constraint staff_action_known;
alter table staff_actions add constraint staff_action_known check (action in (
    'login', 'logout', 'release_hold', 'set_capacity', 'repair_resource', 'retry_refund',
    'redeem', 'refund_order'
));

-------------------------------------------------------------------------------
-- the engine: sold units given back
-------------------------------------------------------------------------------

-- Give back `p_qty` units of a sold hold. With `p_restock` they are on sale
-- again; without, the resource's total shrinks with them (a cancelled
-- slot: nobody else may buy it). Under the resource's row lock, as every
-- change of the counters.
create function hf_return(p_hold uuid, p_qty integer, p_restock boolean, p_actor text,
                          p_reason text)
returns void
language plpgsql as $$
declare
    h holds;
begin
    if p_qty is null or p_qty < 1 then
        perform hf_bad_input('qty must be a positive number');
    end if;
    select * into h from holds where id = p_hold;
    if not found then
        perform hf_bad_input('no such hold');
    end if;
    -- lock: the resource
    perform 1 from resources where id = h.resource_id for no key update;
    select * into h from holds where id = p_hold for update;
    if h.state <> 'confirmed' then
        perform hf_bad_input('only sold units can be given back');
    end if;
    if h.returned + p_qty > h.qty then
        perform hf_bad_input(format('only %s of that hold are still sold', h.qty - h.returned));
    end if;
    update holds set returned = returned + p_qty where id = p_hold;
    update resources
       set sold = sold - p_qty,
           total = total - case when p_restock then 0 else p_qty end,
           updated_at = clock_timestamp()
     where id = h.resource_id;
    insert into hold_events (hold_id, kind, from_state, to_state, actor, detail)
    values (p_hold, 'returned', 'confirmed', 'confirmed', p_actor,
            jsonb_build_object('qty', p_qty, 'restocked', p_restock, 'reason', p_reason));
end;
$$;

-- Counters versus rows, now that sold units can be given back.
create or replace function hf_check(p_resource text default null)
returns table (resource_id text, total integer, held integer, sold integer,
               rows_held integer, rows_sold integer, drift boolean)
language sql stable as $$
    select r.id, r.total, r.held, r.sold,
           coalesce(x.held, 0)::integer, coalesce(x.sold, 0)::integer,
           (r.held <> coalesce(x.held, 0) or r.sold <> coalesce(x.sold, 0))
      from resources r
      left join (
            select h.resource_id,
                   sum(h.qty) filter (where h.state in ('held', 'awaiting_payment')) as held,
                   sum(h.qty - h.returned) filter (where h.state = 'confirmed') as sold
              from holds h
             where p_resource is null or h.resource_id = p_resource
             group by h.resource_id
      ) x on x.resource_id = r.id
     where p_resource is null or r.id = p_resource
     order by r.id;
$$;

create or replace function hf_repair(p_resource text)
returns table (resource_id text, held_before integer, sold_before integer,
               held_after integer, sold_after integer, repaired boolean)
language plpgsql as $$
declare
    r resources;
    v_held integer;
    v_sold integer;
begin
    -- lock: this resource
    select * into r from resources x where x.id = p_resource for no key update;
    if not found then
        return;
    end if;
    select coalesce(sum(qty) filter (where state in ('held', 'awaiting_payment')), 0),
           coalesce(sum(qty - returned) filter (where state = 'confirmed'), 0)
      into v_held, v_sold
      from holds where holds.resource_id = p_resource;
    update resources x
       set held = v_held, sold = v_sold,
           next_expiry = (select min(expires_at) from holds h where h.resource_id = p_resource and h.state = 'held'),
           next_deadline = (select min(payment_deadline) from holds h
                             where h.resource_id = p_resource and h.state = 'awaiting_payment'),
           updated_at = clock_timestamp()
     where x.id = p_resource;
    return query select p_resource, r.held, r.sold, v_held, v_sold, (r.held <> v_held or r.sold <> v_sold);
end;
$$;

-------------------------------------------------------------------------------
-- redeeming a code
-------------------------------------------------------------------------------

-- Redeem a ticket code (one admission) or a pickup code (one collection),
-- once. Outcomes: admitted, collected, already_used (with when, who and
-- where), refunded, not_valid. The order is locked shared, and a staff
-- refund locks it exclusively, so a unit is never redeemed and refunded at
-- the same moment; two redemptions of one code meet at the primary key.
create function hf_redeem(p_code text, p_by text, p_place text)
returns table (outcome text, kind text, order_id uuid, customer_name text, what text,
               redeemed_at timestamptz, redeemed_by text, place text)
language plpgsql as $$
declare
    v_order uuid;
    v_kind text;
    v_state text;
    v_name text;
    v_refunded boolean;
    v_what text;
    r redemptions;
begin
    if p_by is null or length(p_by) not between 1 and 254 then
        perform hf_bad_input('who redeems must be named (1 to 254 characters)');
    end if;
    if p_place is null or length(p_place) > 100 then
        perform hf_bad_input('the place is at most 100 characters');
    end if;
    if p_code is null or length(p_code) not between 1 and 64 then
        return query select 'not_valid', null::text, null::uuid, null::text, null::text,
                            null::timestamptz, null::text, null::text;
        return;
    end if;
    -- unlocked: which order a code belongs to never changes
    select c.order_id, 'ticket' into v_order, v_kind from order_codes c where c.code = p_code;
    if not found then
        select o.id, 'pickup' into v_order, v_kind from orders o where o.pickup_code = p_code;
        -- shared by two orders (drawn before codes were unique): not
        -- something a door can decide
        if (select count(*) from orders o where o.pickup_code = p_code) > 1 then
            return query select 'not_valid', null::text, null::uuid, null::text,
                                'a pickup code two orders share: look the order up'::text,
                                null::timestamptz, null::text, null::text;
            return;
        end if;
    end if;
    if v_order is null then
        return query select 'not_valid', null::text, null::uuid, null::text, null::text,
                            null::timestamptz, null::text, null::text;
        return;
    end if;
    -- lock: the order, shared
    select o.state, o.customer_name into v_state, v_name from orders o where o.id = v_order for share;
    if v_kind = 'ticket' then
        select c.refunded_at is not null, p.name into v_refunded, v_what
          from order_codes c join products p on p.id = c.product_id where c.code = p_code;
    else
        select coalesce(bool_and(l.refunded_qty = l.qty), true),
               string_agg(l.name || ' × ' || (l.qty - l.refunded_qty), ', ' order by l.name)
                 filter (where l.refunded_qty < l.qty)
          into v_refunded, v_what
          from order_lines l join products p on p.id = l.product_id
         where l.order_id = v_order and p.kind = 'pickup_slot';
    end if;
    select * into r from redemptions x where x.code = p_code;
    if found then
        return query select 'already_used', v_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place;
        return;
    end if;
    if v_refunded or v_state in ('refund_pending', 'refunded') then
        return query select 'refunded', v_kind, v_order, v_name, v_what,
                            null::timestamptz, null::text, null::text;
        return;
    end if;
    if v_state <> 'paid' then
        return query select 'not_valid', v_kind, v_order, v_name, v_what,
                            null::timestamptz, null::text, null::text;
        return;
    end if;
    insert into redemptions (code, order_id, kind, redeemed_by, place)
    values (p_code, v_order, v_kind, p_by, p_place)
    on conflict on constraint redemptions_pkey do nothing
    returning * into r;
    if r.code is not null then
        return query select case v_kind when 'ticket' then 'admitted' else 'collected' end,
                            v_kind, v_order, v_name, v_what, r.redeemed_at, r.redeemed_by, r.place;
        return;
    end if;
    -- another door won the same moment
    select * into r from redemptions x where x.code = p_code;
    return query select 'already_used', v_kind, v_order, v_name, v_what,
                        r.redeemed_at, r.redeemed_by, r.place;
end;
$$;
