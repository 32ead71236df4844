-- Holdfast: one implementation per engine rule. Earlier migrations wrote
-- some rules twice: hf_hold beside the batch hf_hold_many, the start of the
-- payment phase in hf_begin_payment and again inline in hf_attach_payments,
-- and "end these holds, log them, give the units back" in hf_end_purchase
-- and in both expiry functions. From here the batch function and a few
-- locked helpers are the only implementation; the single-request forms
-- call them. No outcome changes: the same statuses, rows and events.
--
-- The current body of every function, whichever migration last wrote it,
-- is in migrations/current/schema.sql (a test proves it equal to the
-- migrated database).

-------------------------------------------------------------------------------
-- ending holds: one helper for release, expiry and lazy expiry
-------------------------------------------------------------------------------

-- End the live ones among p_ids (held or awaiting payment) in state p_state,
-- log each with its reason and give their units back to their resources.
-- The caller holds the lock of every resource the holds lie on.
create function hf_end_holds(p_ids uuid[], p_state text, p_now timestamptz, p_actor text, p_reason text,
                             out ended_holds integer, out ended_qty integer)
language plpgsql as $$
begin
    with live as (
        select id, state as old_state from holds
         where id = any(p_ids) and state in ('held', 'awaiting_payment')
    ), done as (
        update holds h
           set state = p_state, ended_at = p_now, ended_by = p_actor, end_reason = p_reason
          from live
         where h.id = live.id
        returning h.id, h.resource_id, h.qty, live.old_state
    ), logged as (
        insert into hold_events (hold_id, kind, from_state, to_state, actor, detail)
        select id, p_state, old_state, p_state, p_actor, jsonb_build_object('reason', p_reason) from done
    ), given_back as (
        update resources r
           set held = r.held - d.qty, updated_at = p_now
          from (select resource_id, sum(qty)::integer as qty from done group by resource_id) d
         where r.id = d.resource_id
        returning 1
    )
    select count(*)::integer, coalesce(sum(qty), 0)::integer into ended_holds, ended_qty from done;
end;
$$;

create or replace function hf_end_purchase(p_purchase uuid, p_state text, p_now timestamptz,
                                           p_actor text, p_reason text) returns integer
language sql as $$
    select ended_holds
      from hf_end_holds(array(select id from holds
                               where purchase_id = p_purchase and state in ('held', 'awaiting_payment')),
                        p_state, p_now, p_actor, p_reason);
$$;

-- The two expiry scans differ only in which index they walk (plain holds by
-- TTL, paying holds by payment deadline) and which hint they keep; ending
-- the holds is hf_end_holds. The caller holds the resource's lock, so the
-- hint cannot move under the scan. A scan starts at the hint (see 0009) and
-- puts the hint back from where it ended; when it found nothing, from the
-- start of the range, so a hint made late by a hand-written update heals.
create or replace function hf_expire_due_plain(p_resource text, p_now timestamptz, p_actor text, p_limit integer,
                                               out expired_holds integer, out expired_qty integer)
language plpgsql as $$
declare
    v_due uuid[];
    v_last timestamptz;
begin
    select array_agg(d.id), max(d.expires_at) into v_due, v_last
      from (select h.id, h.expires_at from holds h
             where h.resource_id = p_resource and h.state = 'held'
               and h.expires_at >= coalesce((select next_expiry from resources where id = p_resource), '-infinity')
               and h.expires_at <= p_now
             order by h.expires_at
             limit p_limit) d;
    select e.ended_holds, e.ended_qty into expired_holds, expired_qty
      from hf_end_holds(coalesce(v_due, '{}'), 'expired', p_now, p_actor, 'ttl') e;
    update resources
       set next_expiry = (select min(expires_at) from holds
                           where resource_id = p_resource and state = 'held'
                             and expires_at >= coalesce(v_last, '-infinity')),
           updated_at = p_now
     where id = p_resource;
end;
$$;

create or replace function hf_expire_due_paying(p_resource text, p_now timestamptz, p_actor text, p_limit integer,
                                                out expired_holds integer, out expired_qty integer)
language plpgsql as $$
declare
    v_due uuid[];
    v_last timestamptz;
begin
    select array_agg(d.id), max(d.payment_deadline) into v_due, v_last
      from (select h.id, h.payment_deadline from holds h
             where h.resource_id = p_resource and h.state = 'awaiting_payment'
               and h.payment_deadline >= coalesce((select next_deadline from resources where id = p_resource), '-infinity')
               and h.payment_deadline <= p_now
             order by h.payment_deadline
             limit p_limit) d;
    select e.ended_holds, e.ended_qty into expired_holds, expired_qty
      from hf_end_holds(coalesce(v_due, '{}'), 'expired', p_now, p_actor, 'payment_deadline') e;
    update resources
       set next_deadline = (select min(payment_deadline) from holds
                             where resource_id = p_resource and state = 'awaiting_payment'
                               and payment_deadline >= coalesce(v_last, '-infinity')),
           updated_at = p_now
     where id = p_resource;
end;
$$;

-------------------------------------------------------------------------------
-- hold: a batch of one
-------------------------------------------------------------------------------

-- hf_hold_many is the hold engine (validation, the unlocked refusal, lazy
-- expiry, account caps, replays); one request is a batch of one.
create or replace function hf_hold(p_resource text, p_qty integer, p_account text,
                                   p_key text default null, p_ttl interval default null)
returns hold_result
language sql as $$
    select * from hf_hold_many(p_resource, array[p_qty], array[p_account], array[p_key], p_ttl);
$$;

-------------------------------------------------------------------------------
-- the payment phase: one decision, one move
-------------------------------------------------------------------------------

-- May the payment phase of a purchase start now? Settles a purchase that has
-- ended (a line released or expired, or past its TTL or deadline) and says
-- how: confirmed | released | expired | replayed (every line is paying
-- already) | awaiting_payment (it may start). The caller holds the locks.
create function hf_payment_may_start(p_purchase uuid, p_now timestamptz) returns text
language plpgsql as $$
declare
    v_shape purchase_shape;
    v_ended text;
begin
    v_shape := hf_purchase_shape(p_purchase, p_now);
    if v_shape.lines = 0 then
        return 'not_found';
    end if;
    if v_shape.confirmed > 0 then
        return 'confirmed';
    end if;
    v_ended := hf_settle_ended(p_purchase, v_shape, p_now);
    if v_ended is not null then
        return v_ended;
    end if;
    if v_shape.plain = 0 then
        return 'replayed';
    end if;
    return 'awaiting_payment';
end;
$$;

-- Move the held lines of each purchase into the payment phase, each with its
-- own window, log it and pull each resource's deadline hint forward. The
-- caller holds the locks and decided with hf_payment_may_start.
create function hf_start_payment(p_purchases uuid[], p_windows interval[], p_now timestamptz, p_actor text)
returns void
language sql as $$
    with moved as (
        update holds h
           set state = 'awaiting_payment', payment_started_at = p_now, payment_deadline = p_now + p.w
          from unnest(p_purchases, p_windows) as p(purchase, w)
         where h.purchase_id = p.purchase and h.state = 'held'
        returning h.id, h.resource_id, h.payment_deadline
    ), logged as (
        insert into hold_events (hold_id, kind, from_state, to_state, actor, detail)
        select id, 'payment_started', 'held', 'awaiting_payment', p_actor,
               jsonb_build_object('payment_deadline', payment_deadline)
          from moved
    )
    update resources x
       set next_deadline = least(x.next_deadline, m.deadline), updated_at = p_now
      from (select resource_id, min(payment_deadline) as deadline from moved group by resource_id) m
     where x.id = m.resource_id;
$$;

-- begin_payment → awaiting_payment | replayed | expired | confirmed | released | not_found
create or replace function hf_begin_payment(p_id uuid, p_window interval default null,
                                            p_actor text default 'checkout')
returns hold_result
language plpgsql as $$
declare
    s inventory_settings;
    v_window interval;
    v_purchase uuid;
    v_now timestamptz;
    v_status text;
    res hold_result;
begin
    select * into s from inventory_settings;
    v_window := coalesce(p_window, s.payment_window);
    if v_window <= s.hold_ttl then
        perform hf_bad_input(format('payment window (%s) must be longer than the hold TTL (%s)', v_window, s.hold_ttl));
    end if;

    v_purchase := hf_lock_purchase(p_id);
    if v_purchase is null then
        res.status := 'not_found';
        res.hold_id := p_id;
        return res;
    end if;
    v_now := clock_timestamp();
    v_status := hf_payment_may_start(v_purchase, v_now);
    if v_status = 'awaiting_payment' then
        perform hf_start_payment(array[v_purchase], array[v_window], v_now, p_actor);
    end if;
    return hf_purchase_row(v_status, v_purchase, null, null, null);
end;
$$;

-- The combined form (see 0008): the same decision and move for the
-- one-product orders of one resource, then the orders' pages and baskets.
--
-- status: awaiting_payment | replayed | confirmed | expired | released |
--         not_found (as hf_begin_payment) | not_one_product (nothing done),
--         with the order's state after
create or replace function hf_attach_payments(
    p_resource text, p_orders uuid[], p_window_seconds integer[],
    p_session_ids text[], p_urls text[], p_expires timestamptz[], p_baskets text[])
returns table (order_id uuid, status text, order_state text)
language plpgsql as $$
declare
    s inventory_settings;
    v_n integer := coalesce(cardinality(p_orders), 0);
    v_now timestamptz;
    v_status text[] := array_fill(null::text, array[v_n]);
    h holds;
    v_hold uuid;
begin
    if v_n not between 1 and 1000 then
        perform hf_bad_input(format('a batch attaches 1 to 1000 payments, got %s', v_n));
    end if;
    if coalesce(cardinality(p_window_seconds), -1) <> v_n or coalesce(cardinality(p_session_ids), -1) <> v_n
       or coalesce(cardinality(p_urls), -1) <> v_n or coalesce(cardinality(p_expires), -1) <> v_n
       or coalesce(cardinality(p_baskets), -1) <> v_n then
        perform hf_bad_input('every payment needs each of its fields: arrays of one length');
    end if;
    select * into s from inventory_settings;
    if exists (select 1 from unnest(p_window_seconds) w
                where w is null or w * interval '1 second' <= s.hold_ttl) then
        perform hf_bad_input(format('a payment window must be longer than the hold TTL (%s)', s.hold_ttl));
    end if;

    -- lock: the orders, then the resource
    perform 1 from orders where id = any(p_orders) order by id for update;
    perform 1 from resources where id = p_resource for no key update;
    v_now := clock_timestamp();

    for i in 1 .. v_n loop
        v_hold := null;
        select o.hold_id into v_hold from orders o where o.id = p_orders[i];
        if v_hold is null then
            v_status[i] := 'not_found';
            continue;
        end if;
        select * into h from holds where id = v_hold;
        if not found then
            -- a basket's id (its lines may lie on other resources) is not
            -- this call's to move; the rest of the batch goes on
            v_status[i] := case when exists (select 1 from holds where purchase_id = v_hold)
                                then 'not_one_product' else 'not_found' end;
            continue;
        end if;
        if h.resource_id <> p_resource or h.basket_id is not null then
            v_status[i] := 'not_one_product';
            continue;
        end if;
        v_status[i] := hf_payment_may_start(h.purchase_id, v_now);
    end loop;

    perform hf_start_payment(array_agg(o.hold_id), array_agg(p.seconds * interval '1 second'), v_now, 'checkout')
       from unnest(p_orders, p_window_seconds, v_status) as p(order_id, seconds, status)
       join orders o on o.id = p.order_id
      where p.status = 'awaiting_payment'
     having count(*) > 0;

    -- the payment pages; an order whose hold ended before payment could
    -- start is expired, as attach_payment does
    update orders o
       set provider_session_id = p.session_id, provider_url = p.url, provider_expires_at = p.expires,
           state = case when p.status in ('awaiting_payment', 'replayed', 'confirmed') or o.state <> 'pending'
                        then o.state else 'expired' end,
           updated_at = now()
      from unnest(p_orders, p_session_ids, p_urls, p_expires, v_status)
           as p(order_id, session_id, url, expires, status)
     where o.id = p.order_id and p.status not in ('not_found', 'not_one_product');

    -- the baskets of those on their way to pay
    delete from basket_lines b
     using unnest(p_baskets, v_status) as p(basket, status)
     where b.basket_id = p.basket and p.status in ('awaiting_payment', 'replayed', 'confirmed');

    -- and each order's state now
    return query
        select p.order_id, p.status, o.state
          from unnest(p_orders, v_status) with ordinality as p(order_id, status, n)
          left join orders o on o.id = p.order_id
         order by p.n;
end;
$$;
