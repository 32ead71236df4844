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
language plpgsql as $$
declare
    v_lines integer;
begin
    select e.ended_holds into v_lines
      from hf_end_holds(array(select id from holds
                               where purchase_id = p_purchase and state in ('held', 'awaiting_payment')),
                        p_state, p_now, p_actor, p_reason) e;
    return v_lines;
end;
$$;

-- Expire the holds of one resource whose time is up in one phase: plain
-- holds (state held) past their TTL, or paying holds (awaiting_payment)
-- past their payment deadline. The two differ only in which column says
-- when, which hint keeps the earliest, and the reason recorded, so one
-- scan serves both: its statements are built for the phase's columns, each
-- walking that phase's partial index (holds_due_plain, holds_due_paying).
-- The caller holds the resource's lock, so the hint cannot move under the
-- scan. A scan starts at the hint (see 0009) and puts the hint back from
-- where it ended; when it found nothing, from the start of the range, so a
-- hint made late by a hand-written update heals on the next pass.
create function hf_expire_due(p_resource text, p_state text, p_now timestamptz, p_actor text,
                              p_limit integer, out expired_holds integer, out expired_qty integer)
language plpgsql as $$
declare
    -- the phase's column, hint and reason
    v_due text := case p_state when 'held' then 'expires_at' when 'awaiting_payment' then 'payment_deadline' end;
    v_hint text := case p_state when 'held' then 'next_expiry' else 'next_deadline' end;
    v_reason text := case p_state when 'held' then 'ttl' else 'payment_deadline' end;
    v_ids uuid[];
    v_last timestamptz;
begin
    if v_due is null then
        perform hf_bad_input(format('holds expire while held or awaiting payment, not %s', p_state));
    end if;
    execute format(
        'select array_agg(d.id), max(d.due)
           from (select h.id, h.%1$I as due from holds h
                  where h.resource_id = $1 and h.state = $2
                    and h.%1$I >= coalesce((select r.%2$I from resources r where r.id = $1), ''-infinity'')
                    and h.%1$I <= $3
                  order by h.%1$I
                  limit $4) d', v_due, v_hint)
       into v_ids, v_last
      using p_resource, p_state, p_now, p_limit;
    select e.ended_holds, e.ended_qty into expired_holds, expired_qty
      from hf_end_holds(coalesce(v_ids, '{}'), 'expired', p_now, p_actor, v_reason) e;
    execute format(
        'update resources
            set %1$I = (select min(h.%2$I) from holds h
                         where h.resource_id = $1 and h.state = $2
                           and h.%2$I >= coalesce($3, ''-infinity'')),
                updated_at = $4
          where id = $1', v_hint, v_due)
      using p_resource, p_state, v_last, p_now;
end;
$$;

-- (PL/pgSQL wrappers, like every function here that runs statements: its
-- plans are kept per session, where a SQL function's are made per call.)
create or replace function hf_expire_due_plain(p_resource text, p_now timestamptz, p_actor text, p_limit integer,
                                               out expired_holds integer, out expired_qty integer)
language plpgsql as $$
begin
    select * into expired_holds, expired_qty from hf_expire_due(p_resource, 'held', p_now, p_actor, p_limit);
end;
$$;

create or replace function hf_expire_due_paying(p_resource text, p_now timestamptz, p_actor text, p_limit integer,
                                                out expired_holds integer, out expired_qty integer)
language plpgsql as $$
begin
    select * into expired_holds, expired_qty
      from hf_expire_due(p_resource, 'awaiting_payment', p_now, p_actor, p_limit);
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

-- What a purchase of one line looks like, read from its row: the same
-- counts hf_purchase_shape takes from the table (a test holds the two
-- equal), without another read under the lock.
create function hf_line_shape(h holds, p_now timestamptz) returns purchase_shape
language sql immutable as $$
    select 1,
           (h.state = 'confirmed')::integer,
           (h.state = 'released')::integer,
           (h.state = 'expired')::integer,
           (h.state = 'awaiting_payment')::integer,
           (h.state = 'held')::integer,
           (h.state = 'held' and h.expires_at <= p_now)::integer,
           (h.state = 'awaiting_payment' and h.payment_deadline <= p_now)::integer,
           coalesce(h.extensions, 0);
$$;

-- May the payment phase of a purchase of this shape start now? Settles a
-- purchase that has ended (a line released or expired, or past its TTL or
-- deadline) and says how: confirmed | released | expired | replayed (every
-- line is paying already) | awaiting_payment (it may start). The caller
-- holds the locks.
create function hf_payment_may_start(p_purchase uuid, p_shape purchase_shape, p_now timestamptz)
returns text
language plpgsql as $$
declare
    v_ended text;
begin
    if p_shape.lines = 0 then
        return 'not_found';
    end if;
    if p_shape.confirmed > 0 then
        return 'confirmed';
    end if;
    v_ended := hf_settle_ended(p_purchase, p_shape, p_now);
    if v_ended is not null then
        return v_ended;
    end if;
    if p_shape.plain = 0 then
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
language plpgsql as $$
begin
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
end;
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
    v_status := hf_payment_may_start(v_purchase, hf_purchase_shape(v_purchase, v_now), v_now);
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
        if h.state = 'held' and h.expires_at > v_now then
            -- the usual case, a live plain line: it may start (what
            -- hf_payment_may_start answers for it, without two function
            -- calls per order under the tier's lock)
            v_status[i] := 'awaiting_payment';
        else
            -- one line: its shape is its row's
            v_status[i] := hf_payment_may_start(h.purchase_id, hf_line_shape(h, v_now), v_now);
        end if;
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
