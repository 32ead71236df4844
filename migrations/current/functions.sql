-- GENERATED from the migrated database by tests/api/schema.rs: do not edit.
-- The current composite types and function bodies, whichever migration
-- last wrote them; the tables are in schema.sql. Regenerate both after a
-- migration:
--   HOLDFAST_WRITE_SCHEMA=1 cargo test --test api schema::

-- type basket_line_result (last written by 0002_inventory_functions.sql)
create type basket_line_result as (
    status text,
    basket_id uuid,
    resource_id text,
    qty integer,
    line_status text,
    hold_id uuid,
    available integer,
    expires_at timestamp with time zone
);

-- type hold_result (last written by 0002_inventory_functions.sql)
create type hold_result as (
    status text,
    hold_id uuid,
    resource_id text,
    account_id text,
    qty integer,
    state text,
    expires_at timestamp with time zone,
    payment_deadline timestamp with time zone,
    payment_ref text,
    existing_payment_ref text,
    other_hold_id uuid,
    available integer,
    extensions integer
);

-- type purchase_shape (last written by 0002_inventory_functions.sql)
create type purchase_shape as (
    lines integer,
    confirmed integer,
    released integer,
    expired integer,
    paying integer,
    plain integer,
    plain_due integer,
    paying_due integer,
    max_extensions_used integer
);

-- hf_attach_payments (last written by 0230_seats_chosen_together.sql)
CREATE OR REPLACE FUNCTION public.hf_attach_payments(p_resource text, p_orders uuid[], p_window_seconds integer[], p_session_ids text[], p_urls text[], p_expires timestamp with time zone[], p_baskets text[])
 RETURNS TABLE(order_id uuid, status text, order_state text)
 LANGUAGE sql
AS $function$
    select * from hf_attach_payments(array_fill(p_resource, array[coalesce(cardinality(p_orders), 0)]),
                                     p_orders, p_window_seconds, p_session_ids, p_urls, p_expires,
                                     p_baskets)
$function$;

-- hf_attach_payments (last written by 0230_seats_chosen_together.sql)
CREATE OR REPLACE FUNCTION public.hf_attach_payments(p_resources text[], p_orders uuid[], p_window_seconds integer[], p_session_ids text[], p_urls text[], p_expires timestamp with time zone[], p_baskets text[])
 RETURNS TABLE(order_id uuid, status text, order_state text)
 LANGUAGE plpgsql
AS $function$
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
    if coalesce(cardinality(p_resources), -1) <> v_n
       or coalesce(cardinality(p_window_seconds), -1) <> v_n or coalesce(cardinality(p_session_ids), -1) <> v_n
       or coalesce(cardinality(p_urls), -1) <> v_n or coalesce(cardinality(p_expires), -1) <> v_n
       or coalesce(cardinality(p_baskets), -1) <> v_n then
        perform hf_bad_input('every payment needs each of its fields: arrays of one length');
    end if;
    select * into s from inventory_settings;
    if exists (select 1 from unnest(p_window_seconds) w
                where w is null or w * interval '1 second' <= s.hold_ttl) then
        perform hf_bad_input(format('a payment window must be longer than the hold TTL (%s)', s.hold_ttl));
    end if;

    -- lock: the orders, then the resources, ascending
    perform 1 from orders where id = any(p_orders) order by id for update;
    perform 1 from resources where id = any(p_resources) order by id for no key update;
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
        if h.resource_id is distinct from p_resources[i] or h.basket_id is not null then
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
$function$;

-- hf_bad_input (last written by 0002_inventory_functions.sql)
CREATE OR REPLACE FUNCTION public.hf_bad_input(p_message text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
begin
    raise exception '%', p_message using errcode = 'invalid_parameter_value';
end;
$function$;

-- hf_begin_payment (last written by 0013_one_engine.sql)
CREATE OR REPLACE FUNCTION public.hf_begin_payment(p_id uuid, p_window interval DEFAULT NULL::interval, p_actor text DEFAULT 'checkout'::text)
 RETURNS hold_result
 LANGUAGE plpgsql
AS $function$
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
$function$;

-- hf_begin_settling (last written by 0090_settling.sql)
CREATE OR REPLACE FUNCTION public.hf_begin_settling(p_id uuid, p_provider text, p_method text, p_actor text DEFAULT 'payment'::text)
 RETURNS TABLE(status text, purchase_id uuid, settle_method text, settle_deadline timestamp with time zone, payment_deadline timestamp with time zone)
 LANGUAGE plpgsql
AS $function$
declare
    s inventory_settings;
    w settle_windows;
    v_purchase uuid;
    v_now timestamptz;
    v_shape purchase_shape;
    v_ended text;
    v_method text;
    v_deadline timestamptz;
begin
    if p_provider is null or length(p_provider) not between 1 and 40 then
        perform hf_bad_input('a settling payment names its provider');
    end if;
    if p_method is not null and p_method !~ '^[a-z][a-z0-9_]{0,63}$' then
        perform hf_bad_input(format('not a payment method: %s', left(p_method, 70)));
    end if;
    if p_actor is null or length(p_actor) not between 1 and 200 then
        perform hf_bad_input('actor must be 1 to 200 characters');
    end if;
    select * into w from hf_settle_window(p_provider, p_method);
    if w.provider is null then
        perform hf_bad_input(format('no settling window for %s (settle_windows)', p_provider));
    end if;

    v_purchase := hf_lock_purchase(p_id);
    if v_purchase is null then
        return query select 'not_found', p_id, null::text, null::timestamptz, null::timestamptz;
        return;
    end if;
    v_now := clock_timestamp();
    v_shape := hf_purchase_shape(v_purchase, v_now);
    if v_shape.confirmed > 0 then
        return query select 'confirmed', v_purchase, null::text, null::timestamptz, null::timestamptz;
        return;
    end if;
    v_ended := hf_settle_ended(v_purchase, v_shape, v_now);
    if v_ended is not null then
        return query select v_ended, v_purchase, null::text, null::timestamptz, null::timestamptz;
        return;
    end if;
    -- the same debit reported again (the webhook, the return, reconciliation)
    if exists (select 1 from holds h where h.purchase_id = v_purchase and h.settle_deadline is not null) then
        return query
            select 'replayed', v_purchase, min(h.settle_method), min(h.settle_deadline), min(h.payment_deadline)
              from holds h where h.purchase_id = v_purchase;
        return;
    end if;

    select * into s from inventory_settings;
    v_method := p_provider || ':' || coalesce(p_method, '*');
    v_deadline := hf_settle_deadline(v_now, w.days, w.business_days);
    with live as (
        select h.id, h.state as old_state from holds h
         where h.purchase_id = v_purchase and h.state in ('held', 'awaiting_payment')
    ), moved as (
        update holds h
           set state = 'awaiting_payment',
               payment_started_at = coalesce(h.payment_started_at, v_now),
               settle_method = v_method,
               settling_at = v_now,
               settle_deadline = greatest(v_deadline, coalesce(h.payment_deadline, v_now)),
               settle_grace = s.settle_grace,
               payment_deadline = greatest(v_deadline, coalesce(h.payment_deadline, v_now)) + s.settle_grace
          from live
         where h.id = live.id
        returning h.id, h.resource_id, h.settle_deadline, h.payment_deadline, live.old_state
    ), logged as (
        insert into hold_events (hold_id, kind, from_state, to_state, actor, detail)
        select moved.id, 'settling', moved.old_state, 'awaiting_payment', p_actor,
               jsonb_build_object('method', v_method, 'settle_deadline', moved.settle_deadline,
                                  'payment_deadline', moved.payment_deadline)
          from moved
    )
    -- a line that was not paying yet has a deadline now
    update resources x
       set next_deadline = least(x.next_deadline, m.deadline), updated_at = v_now
      from (select moved.resource_id, min(moved.payment_deadline) as deadline
              from moved group by moved.resource_id) m
     where x.id = m.resource_id;
    return query
        select 'settling', v_purchase, min(h.settle_method), min(h.settle_deadline), min(h.payment_deadline)
          from holds h where h.purchase_id = v_purchase;
end;
$function$;

-- hf_bookable_times (last written by 0160_tables.sql)
CREATE OR REPLACE FUNCTION public.hf_bookable_times(p_room text, p_from timestamp with time zone, p_to timestamp with time zone, p_party integer)
 RETURNS TABLE(product_id text, starts_at timestamp with time zone, covers_left integer, seats boolean)
 LANGUAGE sql
 STABLE
AS $function$
    select t.product_id, t.starts_at, r.total - r.held - r.sold,
           (r.total - r.held - r.sold >= p_party
            and exists (select 1 from hf_free_sets(
                            p_room, p_party,
                            tstzrange(t.starts_at, t.starts_at + (hf_table_terms(t.product_id, p_party)).turn, '[)'),
                            null)))
      from dining_times t
      join products p on p.id = t.product_id
      join resources r on r.id = t.resource_id
      join dining_rooms d on d.collection = t.room
     where t.room = p_room and t.starts_at >= p_from and t.starts_at < p_to
       and p.active and p.archived_at is null
       and (p.sale_closes_at is null or p.sale_closes_at > now())
       and t.starts_at > now()
       and p_party between 1 and d.largest_party
     order by t.starts_at;
$function$;

-- hf_check (last written by 0180_seating.sql)
CREATE OR REPLACE FUNCTION public.hf_check(p_resource text DEFAULT NULL::text)
 RETURNS TABLE(resource_id text, total integer, held integer, sold integer, rows_held integer, rows_sold integer, drift boolean)
 LANGUAGE sql
 STABLE
AS $function$
    select r.id, r.total, r.held, r.sold,
           coalesce(x.held, 0)::integer, coalesce(x.sold, 0)::integer,
           (r.held <> coalesce(x.held, 0) or r.sold <> coalesce(x.sold, 0)
            or exists (select 1 from dining_times t where t.resource_id = r.id)
               and (exists (select 1 from holds h
                             where h.resource_id = r.id
                               and (h.state in ('held', 'awaiting_payment')
                                    or h.state = 'confirmed' and h.returned < h.qty)
                               and not exists (select 1 from table_pins p where p.hold_id = h.id and p.live))
                    or exists (select 1 from table_pins p join holds h on h.id = p.hold_id
                                where h.resource_id = r.id and p.live
                                  and not (h.state in ('held', 'awaiting_payment')
                                           or h.state = 'confirmed' and h.returned < h.qty)))
            or (s.product_id is not null
                and (r.held + r.sold <> coalesce(pins.live, 0)
                     or r.total <> coalesce(pins.open, 0))))
      from resources r
      left join (
            select h.resource_id,
                   sum(h.qty) filter (where h.state in ('held', 'awaiting_payment')) as held,
                   sum(h.qty - h.returned) filter (where h.state = 'confirmed') as sold
              from holds h
             where p_resource is null or h.resource_id = p_resource
             group by h.resource_id
      ) x on x.resource_id = r.id
      left join seat_sections s on s.resource_id = r.id
      left join lateral (
            select (select count(*) from seat_pins p join seats t on t.id = p.seat_id
                     where t.section = s.product_id and p.live) as live,
                   (select count(*) from seats t
                     where t.section = s.product_id and t.state = 'open') as open
             where s.product_id is not null
      ) pins on true
     where p_resource is null or r.id = p_resource
     order by r.id;
$function$;

-- hf_claim_again (last written by 0180_seating.sql)
CREATE OR REPLACE FUNCTION public.hf_claim_again(p_id uuid, p_payment_ref text, p_actor text DEFAULT 'payment'::text)
 RETURNS TABLE(status text, purchase_id uuid, resource_id text, available integer)
 LANGUAGE plpgsql
AS $function$
declare
    v_purchase uuid;
    v_now timestamptz;
    v_shape purchase_shape;
    v_other uuid;
    v_new uuid;
    l record;
    r resources;
begin
    if p_payment_ref is null or length(p_payment_ref) not between 1 and 255 then
        perform hf_bad_input('payment reference must be 1 to 255 characters');
    end if;
    if p_actor is null or length(p_actor) not between 1 and 200 then
        perform hf_bad_input('actor must be 1 to 200 characters');
    end if;
    v_purchase := hf_lock_purchase(p_id);
    if v_purchase is null then
        return query select 'not_found', p_id, null::text, null::integer;
        return;
    end if;
    v_now := clock_timestamp();

    -- the payment's claim: hf_confirm_many made it for this purchase when
    -- it refused the money; another purchase's claim is another story
    select x.purchase_id into v_other from payment_refs x where x.payment_ref = p_payment_ref;
    if found and v_other <> v_purchase then
        if exists (select 1 from holds h
                    where h.purchase_id = v_other
                      and h.reclaims in (select e.id from holds e where e.purchase_id = v_purchase)) then
            return query select 'already_claimed', v_other, null::text, null::integer;
        else
            return query select 'payment_ref_in_use', v_other, null::text, null::integer;
        end if;
        return;
    end if;

    v_shape := hf_purchase_shape(v_purchase, v_now);
    if v_shape.released > 0 then
        return query select 'released', v_purchase, null::text, null::integer;
        return;
    end if;
    if v_shape.expired <> v_shape.lines then
        return query select 'not_ended', v_purchase, null::text, null::integer;
        return;
    end if;

    for l in select h.id, h.resource_id, h.qty from holds h
              where h.purchase_id = v_purchase order by h.resource_id loop
        select * into r from resources x where x.id = l.resource_id;
        -- expired plain holds count as free, as for any hold (their units
        -- go to the line first, in this transaction)
        if (r.total - r.held - r.sold < l.qty
            or exists (select 1 from seat_pins p
                        where p.hold_id = l.id
                          and exists (select 1 from seat_pins q where q.seat_id = p.seat_id and q.live)))
           and r.next_expiry <= v_now then
            perform hf_expire_due_plain(l.resource_id, v_now, 'lazy-expiry', null);
            select * into r from resources x where x.id = l.resource_id;
        end if;
        if hf_line_waits(l.resource_id, v_now) then
            return query select 'line_waiting', v_purchase, l.resource_id, r.total - r.held - r.sold;
            return;
        end if;
        if r.total - r.held - r.sold < l.qty then
            return query select 'sold_out', v_purchase, l.resource_id, r.total - r.held - r.sold;
            return;
        end if;
        -- its seats, each free and on sale again
        if exists (select 1 from seat_pins p join seats s on s.id = p.seat_id
                    where p.hold_id = l.id
                      and (s.state <> 'open'
                           or exists (select 1 from seat_pins q where q.seat_id = p.seat_id and q.live))) then
            return query select 'sold_out', v_purchase, l.resource_id, r.total - r.held - r.sold;
            return;
        end if;
    end loop;

    v_new := gen_random_uuid();
    insert into payment_refs as x (payment_ref, purchase_id) values (p_payment_ref, v_new)
    on conflict (payment_ref) do update set purchase_id = excluded.purchase_id;
    with claimed as (
        insert into holds (id, basket_id, resource_id, account_id, qty, state, expires_at,
                           payment_ref, confirmed_at, reclaims)
        select hf_uuid_v7(), v_new, h.resource_id, h.account_id, h.qty, 'confirmed', v_now,
               p_payment_ref, v_now, h.id
          from holds h where h.purchase_id = v_purchase
        returning holds.id, holds.resource_id, holds.qty, holds.reclaims
    ), logged as (
        insert into hold_events (hold_id, kind, to_state, actor, detail)
        select c.id, 'reclaimed', 'confirmed', p_actor,
               jsonb_build_object('payment_ref', p_payment_ref, 'reclaims', c.reclaims, 'qty', c.qty)
          from claimed c
    )
    update resources x
       set sold = x.sold + c.qty, updated_at = v_now
      from claimed c
     where x.id = c.resource_id;
    -- the same seats, pinned to the sale
    insert into seat_pins (seat_id, hold_id)
    select p.seat_id, h.id from holds h join seat_pins p on p.hold_id = h.reclaims
     where h.basket_id = v_new;
    return query select 'claimed', v_new, null::text, null::integer;
end;
$function$;

-- hf_claimable (last written by 0180_seating.sql)
CREATE OR REPLACE FUNCTION public.hf_claimable(p_purchase uuid)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
    select coalesce(bool_and(
               h.state = 'expired'
               and not hf_line_waits(h.resource_id, now())
               and (select r.total - r.held - r.sold
                           + (select coalesce(sum(d.qty), 0) from holds d
                               where d.resource_id = r.id and d.state = 'held' and d.expires_at <= now())
                      from resources r where r.id = h.resource_id) >= h.qty
               and not exists (select 1 from seat_pins p join seats s on s.id = p.seat_id
                                where p.hold_id = h.id
                                  and (s.state <> 'open'
                                       or exists (select 1 from seat_pins q
                                                   join holds o on o.id = q.hold_id
                                                  where q.seat_id = p.seat_id and q.live
                                                    and not (o.state = 'held' and o.expires_at <= now()))))),
           false)
      from holds h
     where h.purchase_id = p_purchase;
$function$;

-- hf_confirm (last written by 0015_confirm_many.sql)
CREATE OR REPLACE FUNCTION public.hf_confirm(p_id uuid, p_payment_ref text, p_actor text DEFAULT 'payment'::text)
 RETURNS hold_result
 LANGUAGE sql
AS $function$
    select * from hf_confirm_many(array[p_id], array[p_payment_ref], p_actor);
$function$;

-- hf_confirm_many (last written by 0015_confirm_many.sql)
CREATE OR REPLACE FUNCTION public.hf_confirm_many(p_ids uuid[], p_payment_refs text[], p_actor text DEFAULT 'payment'::text)
 RETURNS SETOF hold_result
 LANGUAGE plpgsql
AS $function$
declare
    i integer;
    v_id uuid;
    v_ref text;
    v_purchase uuid;
    v_now timestamptz;
    v_shape purchase_shape;
    v_ended text;
    v_existing text;
    v_other uuid;
    v_moved integer;
    v_resources text[] := '{}';
    v_qtys integer[] := '{}';
    res hold_result;
begin
    if coalesce(cardinality(p_ids), 0) <> coalesce(cardinality(p_payment_refs), 0) then
        perform hf_bad_input('one payment reference for each purchase');
    end if;

    -- lock: every resource the batch may sell from, ascending id, before
    -- any purchase (each hf_lock_purchase below then finds its own locked),
    -- so a batch over several resources takes them in the order every
    -- other path does
    perform 1 from resources
      where id in (select resource_id from holds
                    where purchase_id in (select purchase_id from holds
                                           where id = any(p_ids) or purchase_id = any(p_ids)))
      order by id
      for no key update;

    for i in 1 .. coalesce(cardinality(p_ids), 0) loop
        v_id := p_ids[i];
        v_ref := p_payment_refs[i];
        if v_ref is null or length(v_ref) not between 1 and 255 then
            perform hf_bad_input('payment reference must be 1 to 255 characters');
        end if;

        v_purchase := hf_lock_purchase(v_id);
        if v_purchase is null then
            res := null;
            res.status := 'not_found';
            res.hold_id := v_id;
            res.payment_ref := v_ref;
            return next res;
            continue;
        end if;
        v_now := clock_timestamp();

        -- Claim the payment reference before anything else: a payment that
        -- bought (or was refused for) another purchase is never answered
        -- with an outcome that would refund it or sell with it here. A
        -- concurrent claim of the same reference waits for that
        -- transaction, then loses. Refused payments keep their claim, so
        -- money that is being refunded can never buy anything later.
        insert into payment_refs (payment_ref, purchase_id) values (v_ref, v_purchase)
        on conflict (payment_ref) do nothing;
        if not found then
            select purchase_id into v_other from payment_refs where payment_ref = v_ref;
            if v_other is distinct from v_purchase then
                return next hf_purchase_row('payment_ref_in_use', v_purchase, v_ref, null, v_other);
                continue;
            end if;
        end if;

        v_shape := hf_purchase_shape(v_purchase, v_now);
        if v_shape.confirmed > 0 then
            select payment_ref into v_existing from holds
             where purchase_id = v_purchase and state = 'confirmed' limit 1;
            if v_existing = v_ref then
                return next hf_purchase_row('already_confirmed', v_purchase, v_ref, null, null);
            else
                return next hf_purchase_row('duplicate_payment', v_purchase, v_ref, v_existing, null);
            end if;
            continue;
        end if;

        -- A released or expired purchase is never revived: the money goes back.
        v_ended := hf_settle_ended(v_purchase, v_shape, v_now);
        if v_ended is not null then
            return next hf_purchase_row(v_ended, v_purchase, v_ref, null, null);
            continue;
        end if;

        with sold as (
            update holds
               set state = 'confirmed', payment_ref = v_ref, confirmed_at = v_now
             where purchase_id = v_purchase and state in ('held', 'awaiting_payment')
            returning id, resource_id, qty, (payment_started_at is not null) as was_paying
        ), logged as (
            insert into hold_events (hold_id, kind, from_state, to_state, actor, detail)
            select id, 'confirmed', case when was_paying then 'awaiting_payment' else 'held' end,
                   'confirmed', p_actor, jsonb_build_object('payment_ref', v_ref)
              from sold
        )
        select v_resources || coalesce(array_agg(resource_id), '{}'),
               v_qtys || coalesce(array_agg(qty), '{}'),
               count(*)
          into v_resources, v_qtys, v_moved
          from sold;
        -- every line of a live purchase moves, or something is badly wrong
        if v_moved = 0 then
            raise exception 'confirm of purchase % moved no holds', v_purchase;
        end if;
        return next hf_purchase_row('confirmed', v_purchase, v_ref, null, null);
    end loop;

    -- what was sold, moved from held to sold: once per resource
    update resources x
       set held = x.held - m.qty, sold = x.sold + m.qty, updated_at = clock_timestamp()
      from (select r, sum(q)::integer as qty from unnest(v_resources, v_qtys) as u(r, q) group by r) m
     where x.id = m.r;
    get diagnostics v_moved = row_count;
    if v_moved <> (select count(distinct r) from unnest(v_resources) as u(r)) then
        raise exception 'a batch of confirmations moved the counters of % of its resources', v_moved;
    end if;
end;
$function$;

-- hf_draft_not_on_sale (last written by 0123_drafts.sql)
CREATE OR REPLACE FUNCTION public.hf_draft_not_on_sale()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
    if new.active and (new.draft or exists (
        select 1 from collections c where c.id = new.collection and c.draft)) then
        new.active := false;
    end if;
    return new;
end;
$function$;

-- hf_due_resources (last written by 0002_inventory_functions.sql)
CREATE OR REPLACE FUNCTION public.hf_due_resources()
 RETURNS SETOF text
 LANGUAGE sql
 STABLE
AS $function$
    select id from resources
     where least(next_expiry, next_deadline) <= clock_timestamp()
     order by id;
$function$;

-- hf_end_holds (last written by 0070_waiting_list.sql)
CREATE OR REPLACE FUNCTION public.hf_end_holds(p_ids uuid[], p_state text, p_now timestamp with time zone, p_actor text, p_reason text, OUT ended_holds integer, OUT ended_qty integer)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
declare
    v_resources text[];
    v_offers    uuid[];
begin
    with live as (
        select id, state as old_state from holds
         where id = any(p_ids) and state in ('held', 'awaiting_payment')
    ), done as (
        update holds h
           set state = p_state, ended_at = p_now, ended_by = p_actor, end_reason = p_reason
          from live
         where h.id = live.id
        returning h.id, h.resource_id, h.qty, h.account_id, live.old_state
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
    select count(*)::integer, coalesce(sum(qty), 0)::integer,
           array_agg(distinct resource_id),
           array_agg(substr(account_id, 10)::uuid) filter (where account_id like 'waitlist:%')
      into ended_holds, ended_qty, v_resources, v_offers
      from done;
    if v_offers is not null then
        update waitlist_entries
           set state = 'lapsed', ended_at = p_now, ended_by = p_actor
         where id = any (v_offers) and state = 'offered';
    end if;
    if ended_qty > 0 then
        -- in resource order, as every path takes resource locks
        perform hf_hand_over(x.id, p_now) from unnest(v_resources) as x(id) order by x.id;
    end if;
end;
$function$;

-- hf_end_pins (last written by 0160_tables.sql)
CREATE OR REPLACE FUNCTION public.hf_end_pins()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
    update table_pins set live = false where hold_id = new.id and live;
    return null;
end;
$function$;

-- hf_end_purchase (last written by 0013_one_engine.sql)
CREATE OR REPLACE FUNCTION public.hf_end_purchase(p_purchase uuid, p_state text, p_now timestamp with time zone, p_actor text, p_reason text)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
declare
    v_lines integer;
begin
    select e.ended_holds into v_lines
      from hf_end_holds(array(select id from holds
                               where purchase_id = p_purchase and state in ('held', 'awaiting_payment')),
                        p_state, p_now, p_actor, p_reason) e;
    return v_lines;
end;
$function$;

-- hf_expire_due (last written by 0013_one_engine.sql)
CREATE OR REPLACE FUNCTION public.hf_expire_due(p_resource text, p_state text, p_now timestamp with time zone, p_actor text, p_limit integer, OUT expired_holds integer, OUT expired_qty integer)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
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
$function$;

-- hf_expire_due_paying (last written by 0013_one_engine.sql)
CREATE OR REPLACE FUNCTION public.hf_expire_due_paying(p_resource text, p_now timestamp with time zone, p_actor text, p_limit integer, OUT expired_holds integer, OUT expired_qty integer)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
begin
    select * into expired_holds, expired_qty
      from hf_expire_due(p_resource, 'awaiting_payment', p_now, p_actor, p_limit);
end;
$function$;

-- hf_expire_due_plain (last written by 0013_one_engine.sql)
CREATE OR REPLACE FUNCTION public.hf_expire_due_plain(p_resource text, p_now timestamp with time zone, p_actor text, p_limit integer, OUT expired_holds integer, OUT expired_qty integer)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
begin
    select * into expired_holds, expired_qty from hf_expire_due(p_resource, 'held', p_now, p_actor, p_limit);
end;
$function$;

-- hf_extend (last written by 0002_inventory_functions.sql)
CREATE OR REPLACE FUNCTION public.hf_extend(p_id uuid, p_by interval DEFAULT NULL::interval, p_actor text DEFAULT 'shopper'::text)
 RETURNS hold_result
 LANGUAGE plpgsql
AS $function$
declare
    s inventory_settings;
    v_by interval;
    v_purchase uuid;
    v_now timestamptz;
    v_shape purchase_shape;
    res hold_result;
begin
    select * into s from inventory_settings;
    v_by := coalesce(p_by, s.extension);
    if v_by <= interval '0' then
        perform hf_bad_input(format('an extension must be positive, got %s', v_by));
    end if;

    v_purchase := hf_lock_purchase(p_id);
    if v_purchase is null then
        res.status := 'not_found';
        res.hold_id := p_id;
        return res;
    end if;
    v_now := clock_timestamp();
    v_shape := hf_purchase_shape(v_purchase, v_now);

    -- an ended basket is settled as a whole, never left half-live
    if hf_settle_ended(v_purchase, v_shape, v_now) is not null then
        return hf_purchase_row('not_extendable', v_purchase, null, null, null);
    end if;
    -- only a live plain hold with extensions left
    if v_shape.plain <> v_shape.lines or v_shape.max_extensions_used >= s.max_extensions then
        return hf_purchase_row('not_extendable', v_purchase, null, null, null);
    end if;

    with extended as (
        update holds
           set expires_at = expires_at + v_by, extensions = extensions + 1
         where purchase_id = v_purchase
        returning id, expires_at, extensions
    )
    insert into hold_events (hold_id, kind, from_state, to_state, actor, detail)
    select id, 'extended', 'held', 'held', p_actor,
           jsonb_build_object('expires_at', expires_at, 'extensions', extensions)
      from extended;
    -- next_expiry may now be early, which only costs one scan later

    return hf_purchase_row('extended', v_purchase, null, null, null);
end;
$function$;

-- hf_free_sets (last written by 0260_walk_ins.sql)
CREATE OR REPLACE FUNCTION public.hf_free_sets(p_room text, p_party integer, p_during tstzrange, p_except uuid)
 RETURNS TABLE(set_id text, tables text[], max_party integer, joined boolean, idle interval, priority integer)
 LANGUAGE sql
 STABLE
AS $function$
    with room as (
        select chooser, least_fill from dining_rooms where collection = p_room
    ), period as (
        -- the stay's service period that day: its first time, and its
        -- last seating (a period is at most eleven hours here, so the
        -- same period of the day before never counts)
        select coalesce(min(t.starts_at), lower(p_during)) as opens,
               coalesce(min(t.starts_at), lower(p_during))
                 + coalesce(max(pe.last_seating - pe.opens), interval '0') as last_seating
          from dining_times me
          join dining_periods pe on pe.room = me.room and pe.name = me.period
          join dining_times t on t.room = me.room and t.period = me.period
                             and t.starts_at <= me.starts_at
                             and t.starts_at >= me.starts_at
                                 - least(pe.last_seating - pe.opens, interval '11 hours')
         where me.room = p_room and me.starts_at = lower(p_during)
    ), sets as (
        select t.id as set_id, array[t.id] as tables, t.min_party, t.max_party, t.priority,
               t.position, false as joined
          from dining_tables t
         where t.room = p_room and t.archived_at is null
        union all
        select j.id, j.tables, j.min_party, j.max_party, j.priority,
               (select min(t.position) from dining_tables t
                 where t.room = p_room and t.id = any (j.tables)), true
          from dining_joins j
         where j.room = p_room and j.archived_at is null
           -- every table of the set is one of the room's, not archived
           and (select count(*) from dining_tables t
                 where t.room = p_room and t.id = any (j.tables) and t.archived_at is null)
               = cardinality(j.tables)
    ), fitting as (
        select s.*,
               -- the shortest turn the set can take: its smallest party's
               coalesce((select u.minutes from dining_turns u
                          where u.room = p_room and u.up_to_party >= s.min_party
                          order by u.up_to_party limit 1),
                        (select u.minutes from dining_turns u
                          where u.room = p_room order by u.up_to_party desc limit 1),
                        120) as shortest
          from sets s
         where p_party between s.min_party and s.max_party
           and not exists (select 1 from table_pins p
                            where p.room = p_room and p.table_id = any (s.tables) and p.live
                              and p.during && p_during
                              and (p.hold_id is null or p.hold_id is distinct from p_except))
    ), gaps as (
        -- per table of a set: the end of the stay before (or the period's
        -- first time) and the start of the next one in the period
        select f.set_id, f.joined, f.shortest, x.id,
               greatest((select max(upper(p.during)) from table_pins p
                          where p.room = p_room and p.table_id = x.id and p.live
                            and (p.hold_id is null or p.hold_id is distinct from p_except)
                            and upper(p.during) <= lower(p_during)),
                        (select opens from period)) as before,
               (select min(lower(p.during)) from table_pins p
                 where p.room = p_room and p.table_id = x.id and p.live
                   and (p.hold_id is null or p.hold_id is distinct from p_except)
                   and lower(p.during) >= upper(p_during)
                   and lower(p.during) <= (select last_seating from period)) as after
          from fitting f, unnest(f.tables) as x(id)
    ), lost as (
        -- minutes of a gap no turn can use: what is left over after the
        -- turns that fit in it; the stay's share is what its two gaps
        -- lose beyond what the gap it splits lost already
        select g.set_id, g.joined,
               sum(hf_gap_lost(lower(p_during) - g.before, g.shortest)
                   + hf_gap_lost(g.after - upper(p_during), g.shortest)
                   - hf_gap_lost(g.after - g.before, g.shortest))
                 / count(*) as minutes
          from gaps g
         group by g.set_id, g.joined
    )
    select f.set_id, f.tables, f.max_party, f.joined,
           (select sum(
                   least(coalesce(lower(p_during) - (
                       select max(upper(p.during)) from table_pins p
                        where p.room = p_room and p.table_id = x.id and p.live
                          and (p.hold_id is null or p.hold_id is distinct from p_except)
                          and p.during && tstzrange(lower(p_during) - interval '4 hours', lower(p_during))),
                       interval '4 hours'), interval '4 hours')
                 + least(coalesce((
                       select min(lower(p.during)) from table_pins p
                        where p.room = p_room and p.table_id = x.id and p.live
                          and (p.hold_id is null or p.hold_id is distinct from p_except)
                          and p.during && tstzrange(upper(p_during), upper(p_during) + interval '4 hours'))
                       - upper(p_during), interval '4 hours'), interval '4 hours'))
              from unnest(f.tables) as x(id)) as idle,
           f.priority
      from fitting f
      join lost l on l.set_id = f.set_id and l.joined = f.joined
     cross join room
     where p_except is not null
        or room.least_fill = 0
        -- the party's seat-time against the set's, with the time it loses
        or 100 * p_party * hf_minutes(upper(p_during) - lower(p_during))
           >= room.least_fill * f.max_party
              * (hf_minutes(upper(p_during) - lower(p_during)) + greatest(l.minutes, 0))
     order by case when room.chooser = 'first_fit' then f.position end,
              case when room.chooser = 'first_fit' then f.set_id end,
              f.max_party, f.joined, l.minutes, idle, f.priority, f.set_id;
$function$;

-- hf_gap_lost (last written by 0161_tables_fill.sql)
CREATE OR REPLACE FUNCTION public.hf_gap_lost(p_gap interval, p_shortest integer)
 RETURNS numeric
 LANGUAGE sql
 IMMUTABLE
AS $function$
    select coalesce(mod(hf_minutes(p_gap), p_shortest), 0);
$function$;

-- hf_hand_over (last written by 0196_hand_over_once.sql)
CREATE OR REPLACE FUNCTION public.hf_hand_over(p_resource text, p_now timestamp with time zone)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
declare
    r         resources;
    e         record;
    v_left    integer;
    v_hold    uuid;
    v_unit    bigint;
    v_until   timestamptz;
    v_offered integer := 0;
    v_waiting boolean;
    -- products served strictly in order whose first entry did not fit
    v_blocked text[] := '{}';
    -- a seated section: the seats of each offer
    v_seated  boolean;
    v_seats   bigint[];
    -- a table time (the resource has dining times): each offer needs a
    -- table, and nothing is set aside
    v_tables  boolean;
    v_terms   record;
begin
    v_waiting := hf_line_waits(p_resource, p_now);
    -- nobody waiting and nothing set aside: nothing to do, no lock taken
    if not v_waiting and not exists (select 1 from holds
                                      where account_id = 'waitlist-line'
                                        and resource_id = p_resource
                                        and state in ('held', 'awaiting_payment')) then
        return 0;
    end if;
    -- lock: this resource
    perform 1 from resources where id = p_resource for no key update;
    perform hf_release_aside(p_resource, p_now);
    select * into r from resources where id = p_resource;
    v_left := r.total - r.held - r.sold;
    if v_left <= 0 or not v_waiting then
        return 0;
    end if;
    v_seated := (hf_seat_section(p_resource)).product_id is not null;
    v_tables := exists (select 1 from dining_times where resource_id = p_resource);
    for e in
        select w.id, w.qty, w.email_key, p.id as product_id, p.price_minor,
               p.waitlist_claim_minutes, p.waitlist_in_order, p.max_per_order
          from waitlist_entries w
          join products p on p.id = w.product_id
         where p.resource_id = p_resource and w.state = 'waiting'
           and p.active and p.archived_at is null
           and (p.sale_closes_at is null or p.sale_closes_at > p_now)
         order by w.line_no
           for update of w
    loop
        exit when v_left <= 0;
        continue when e.product_id = any (v_blocked);
        v_seats := null;
        if e.qty <= v_left and v_seated then
            select c.seat_ids into v_seats
              from hf_seat_choose(p_resource, null, e.qty, true, '{}') c
             where c.status = 'chosen';
        end if;
        if e.qty > v_left or (v_seated and v_seats is null) then
            -- strictly in order: nobody behind this group, of its product,
            -- is served before it (a table time's parties wait for tables
            -- of their size, so its line is never stopped)
            if e.waitlist_in_order and not v_tables then
                v_blocked := v_blocked || e.product_id;
            end if;
            continue;
        end if;
        -- the e-mail holds units of the product in a pending order already:
        -- the offer would take it past the most per order; it keeps its place
        continue when hf_units_held_by_email(e.email_key, e.product_id) + e.qty > e.max_per_order;
        v_unit := e.price_minor;
        v_until := p_now + make_interval(mins => e.waitlist_claim_minutes);
        if v_tables then
            -- a table time: offered only with a table free at its time for
            -- the party, at its deposit, claimed before the time
            select * into v_terms from hf_table_terms(e.product_id, e.qty);
            continue when not found or v_terms.starts_at <= p_now;
            -- lock: the room, after the resource
            perform 1 from dining_rooms where collection = v_terms.room for no key update;
            continue when not exists (
                select 1 from hf_free_sets(v_terms.room, e.qty,
                                           tstzrange(v_terms.starts_at,
                                                     v_terms.starts_at + v_terms.turn, '[)'),
                                           null));
            v_unit := v_terms.deposit_per_cover;
            v_until := least(v_until, v_terms.starts_at);
        end if;
        perform hf_offer(p_resource, e.id, v_unit, v_until, p_now, v_seats);
        v_left := v_left - e.qty;
        v_offered := v_offered + 1;
    end loop;
    -- what fits nobody in line yet waits for them, looked at again within
    -- the hour (its expiry hands over again) and at every change
    if v_left > 0 and not v_tables and hf_line_waits(p_resource, p_now) then
        v_until := p_now + interval '1 hour';
        v_hold := hf_uuid_v7();
        insert into holds (id, resource_id, account_id, qty, expires_at)
        values (v_hold, p_resource, 'waitlist-line', v_left, v_until);
        insert into hold_events (hold_id, kind, to_state, actor, detail)
        values (v_hold, 'held', 'held', 'waitlist',
                jsonb_build_object('qty', v_left, 'set_aside', true, 'ttl_seconds', 3600));
        update resources
           set held = held + v_left, next_expiry = least(next_expiry, v_until), updated_at = p_now
         where id = p_resource;
        if v_seated then
            -- every free seat: what is set aside is what nobody holds
            perform hf_seat_pin(v_hold, array(
                select s.id from seats s
                  join seat_sections x on x.product_id = s.section
                 where x.resource_id = p_resource and s.state = 'open'
                   and not exists (select 1 from seat_pins p where p.seat_id = s.id and p.live)
                 order by s.row_rank, s.run, s.pos
                 limit v_left));
        end if;
    end if;
    return v_offered;
end;
$function$;

-- hf_hold (last written by 0013_one_engine.sql)
CREATE OR REPLACE FUNCTION public.hf_hold(p_resource text, p_qty integer, p_account text, p_key text DEFAULT NULL::text, p_ttl interval DEFAULT NULL::interval)
 RETURNS hold_result
 LANGUAGE sql
AS $function$
    select * from hf_hold_many(p_resource, array[p_qty], array[p_account], array[p_key], p_ttl);
$function$;

-- hf_hold_basket (last written by 0002_inventory_functions.sql)
CREATE OR REPLACE FUNCTION public.hf_hold_basket(p_resources text[], p_qtys integer[], p_account text, p_key text DEFAULT NULL::text, p_ttl interval DEFAULT NULL::interval)
 RETURNS SETOF basket_line_result
 LANGUAGE plpgsql
AS $function$
declare
    s inventory_settings;
    v_now timestamptz;
    v_ttl interval;
    v_ids text[];
    v_qtys integer[];
    v_found text[] := '{}';
    v_avail integer[] := '{}';
    v_short boolean := false;
    v_over_cap boolean := false;
    v_basket uuid;
    v_existing uuid;
    v_mine integer;
    v_total_qty integer;
    r resources;
    i integer;
begin
    if p_resources is null or p_qtys is null or cardinality(p_resources) = 0 then
        perform hf_bad_input('a basket needs at least one line');
    end if;
    if cardinality(p_resources) <> cardinality(p_qtys) then
        perform hf_bad_input('a basket needs one quantity per resource');
    end if;
    if cardinality(p_resources) > 100 then
        perform hf_bad_input('a basket holds at most 100 lines');
    end if;
    if exists (select 1 from unnest(p_resources, p_qtys) as l(rid, q)
                where rid is null or length(rid) not between 1 and 200 or q is null or q <= 0) then
        perform hf_bad_input('every basket line needs a resource id and a positive qty');
    end if;
    if p_account is null or length(p_account) not between 1 and 200 then
        perform hf_bad_input('account id must be 1 to 200 characters');
    end if;
    if p_key is not null and length(p_key) not between 1 and 255 then
        perform hf_bad_input('idempotency key must be 1 to 255 characters');
    end if;
    select * into s from inventory_settings;
    v_ttl := coalesce(p_ttl, s.hold_ttl);
    if v_ttl <= interval '0' then
        perform hf_bad_input(format('hold TTL must be positive, got %s', v_ttl));
    end if;

    -- the same resource twice is one line with the quantities summed
    select array_agg(rid order by rid), array_agg(q order by rid)
      into v_ids, v_qtys
      from (select rid, sum(q)::integer as q from unnest(p_resources, p_qtys) as l(rid, q) group by rid) m;

    -- lock: every resource of the basket, ascending id
    for r in select * from resources where id = any(v_ids) order by id for no key update loop
        v_found := v_found || r.id;
    end loop;
    v_now := clock_timestamp();

    if cardinality(v_found) < cardinality(v_ids) then
        return query
            select 'unknown_resource', null::uuid, l.rid, l.q,
                   case when l.rid = any(v_found) then 'ok' else 'unknown' end,
                   null::uuid, null::integer, null::timestamptz
              from unnest(v_ids, v_qtys) as l(rid, q);
        return;
    end if;

    if p_key is not null then
        select purchase_id into v_existing from holds
         where account_id = p_account and idempotency_key = p_key and resource_id = any(v_ids)
         limit 1;
        if found then
            -- a key replays only the basket it was first used for
            if exists (
                (select resource_id, qty from holds where purchase_id = v_existing)
                except
                (select rid, q from unnest(v_ids, v_qtys) as l(rid, q))
            ) or exists (
                (select rid, q from unnest(v_ids, v_qtys) as l(rid, q))
                except
                (select resource_id, qty from holds where purchase_id = v_existing)
            ) then
                perform hf_bad_input('this idempotency key was already used for a different basket');
            end if;
            return query
                select 'replayed', h.basket_id, h.resource_id, h.qty, h.state, h.id,
                       x.total - x.held - x.sold, h.expires_at
                  from holds h join resources x on x.id = h.resource_id
                 where h.purchase_id = v_existing
                 order by h.resource_id;
            return;
        end if;
    end if;

    -- capacity, line by line, with the lazy expiry where it is needed
    for i in 1 .. cardinality(v_ids) loop
        select * into r from resources where id = v_ids[i];
        if r.total - r.held - r.sold < v_qtys[i] and r.next_expiry <= v_now then
            perform hf_expire_due_plain(v_ids[i], v_now, 'lazy-expiry', null);
            select * into r from resources where id = v_ids[i];
        end if;
        v_avail := v_avail || (r.total - r.held - r.sold);
        if v_avail[i] < v_qtys[i] then
            v_short := true;
        end if;
    end loop;

    -- not enough comes before the account cap, as in hf_hold
    if v_short then
        return query
            select 'insufficient', null::uuid, l.rid, l.q,
                   case when l.a < l.q then 'short' else 'ok' end,
                   null::uuid, l.a, null::timestamptz
              from unnest(v_ids, v_qtys, v_avail) as l(rid, q, a);
        return;
    end if;

    if s.account_cap is not null then
        if s.cap_scope = 'global' then
            -- lock: this account, after every resource lock
            perform pg_advisory_xact_lock(hashtextextended('holdfast.account:' || p_account, 0));
            select coalesce(sum(qty), 0) into v_mine from holds
             where account_id = p_account
               and (state = 'awaiting_payment' or (state = 'held' and expires_at > v_now));
            select sum(q) into v_total_qty from unnest(v_qtys) as q;
            v_over_cap := v_mine + v_total_qty > s.account_cap;
            if v_over_cap then
                return query
                    select 'account_cap', null::uuid, l.rid, l.q, 'over_cap', null::uuid,
                           greatest(s.account_cap - v_mine, 0), null::timestamptz
                      from unnest(v_ids, v_qtys) as l(rid, q);
                return;
            end if;
        else
            return query
                with mine as (
                    select l.rid, l.q, l.ord,
                           (select coalesce(sum(h.qty), 0) from holds h
                             where h.account_id = p_account and h.resource_id = l.rid
                               and (h.state = 'awaiting_payment' or (h.state = 'held' and h.expires_at > v_now))) as used
                      from unnest(v_ids, v_qtys) with ordinality as l(rid, q, ord)
                )
                select 'account_cap', null::uuid, rid, q,
                       case when used + q > s.account_cap then 'over_cap' else 'ok' end,
                       null::uuid, greatest(s.account_cap - used, 0)::integer, null::timestamptz
                  from mine
                 where exists (select 1 from mine m2 where m2.used + m2.q > s.account_cap)
                 order by ord;
            if found then
                return;
            end if;
        end if;
    end if;

    v_basket := gen_random_uuid();
    return query
        with inserted as (
            insert into holds (basket_id, resource_id, account_id, qty, idempotency_key, expires_at)
            select v_basket, l.rid, p_account, l.q, p_key, v_now + v_ttl
              from unnest(v_ids, v_qtys) as l(rid, q)
            returning id, resource_id, qty, expires_at
        ), logged as (
            insert into hold_events (hold_id, kind, to_state, actor, detail)
            select id, 'held', 'held', p_account,
                   jsonb_build_object('qty', qty, 'basket_id', v_basket, 'ttl_seconds', extract(epoch from v_ttl))
              from inserted
        ), counted as (
            update resources x
               set held = x.held + i.qty,
                   next_expiry = least(x.next_expiry, i.expires_at),
                   updated_at = v_now
              from inserted i
             where x.id = i.resource_id
            returning x.id, x.total - x.held - x.sold as available
        )
        select 'held', v_basket, i.resource_id, i.qty, 'held', i.id, c.available, i.expires_at
          from inserted i join counted c on c.id = i.resource_id
         order by i.resource_id;
end;
$function$;

-- hf_hold_many (last written by 0006_combined_holds.sql)
CREATE OR REPLACE FUNCTION public.hf_hold_many(p_resource text, p_qtys integer[], p_accounts text[], p_keys text[], p_ttl interval DEFAULT NULL::interval)
 RETURNS SETOF hold_result
 LANGUAGE plpgsql
AS $function$
declare
    s inventory_settings;
    r resources;
    h holds;
    v_n integer := coalesce(cardinality(p_qtys), 0);
    v_now timestamptz;
    v_ttl interval;
    v_available integer;
    v_granted integer := 0;
    v_swept boolean := false;
    v_mine integer;
    v_status text[] := '{}';
    v_replayed_from integer[] := '{}';
    v_replies hold_result[] := '{}';
    v_hold uuid[] := '{}';
    v_left integer[] := '{}';
    res hold_result;
begin
    if v_n not between 1 and 1000 then
        perform hf_bad_input(format('a batch holds 1 to 1000 requests, got %s', v_n));
    end if;
    if coalesce(cardinality(p_accounts), -1) <> v_n or coalesce(cardinality(p_keys), -1) <> v_n then
        perform hf_bad_input('quantities, accounts and keys must be arrays of one length');
    end if;
    for i in 1 .. v_n loop
        if p_qtys[i] is null or p_qtys[i] <= 0 then
            perform hf_bad_input(format('qty must be a positive number of units, got %s',
                                        coalesce(p_qtys[i]::text, 'null')));
        end if;
        if p_accounts[i] is null or length(p_accounts[i]) not between 1 and 200 then
            perform hf_bad_input('account id must be 1 to 200 characters');
        end if;
        if p_keys[i] is not null and length(p_keys[i]) not between 1 and 255 then
            perform hf_bad_input('idempotency key must be 1 to 255 characters');
        end if;
    end loop;
    select * into s from inventory_settings;
    v_ttl := coalesce(p_ttl, s.hold_ttl);
    if v_ttl <= interval '0' then
        perform hf_bad_input(format('hold TTL must be positive, got %s', v_ttl));
    end if;

    -- Without the lock, as in hf_hold: only a refusal of the whole batch
    -- (not even its smallest request fits, and nothing is due to expire).
    select * into r from resources where id = p_resource;
    if not found then
        for i in 1 .. v_n loop
            res := null;
            res.status := 'unknown_resource';
            res.resource_id := p_resource;
            return next res;
        end loop;
        return;
    end if;
    v_available := r.total - r.held - r.sold;
    if v_available < (select min(q) from unnest(p_qtys) q)
       and coalesce(r.next_expiry > clock_timestamp(), true) then
        for i in 1 .. v_n loop
            if p_keys[i] is not null then
                select * into h from holds
                 where resource_id = p_resource and account_id = p_accounts[i]
                   and idempotency_key = p_keys[i];
                if found then
                    return next hf_hold_row('replayed', h, v_available);
                    continue;
                end if;
            end if;
            res := null;
            res.status := 'insufficient';
            res.resource_id := p_resource;
            res.account_id := p_accounts[i];
            res.qty := p_qtys[i];
            res.available := v_available;
            return next res;
        end loop;
        return;
    end if;

    -- lock: this resource
    select * into r from resources where id = p_resource for no key update;
    -- then, with a cap across resources, every account of the batch, in
    -- the order of their lock keys, so two batches can never wait on each
    -- other (hf_hold takes one such lock, also after its resource lock)
    if s.account_cap is not null and s.cap_scope = 'global' then
        perform pg_advisory_xact_lock(k)
           from (select distinct hashtextextended('holdfast.account:' || a, 0) as k
                   from unnest(p_accounts) a order by 1) keys;
    end if;
    v_now := clock_timestamp();
    v_available := r.total - r.held - r.sold;

    -- Decide each request in order; write the grants afterwards in one
    -- statement. The ids are made here, so each answer knows its row.
    for i in 1 .. v_n loop
        v_status[i] := null;
        if p_keys[i] is not null then
            -- earlier in this batch?
            for j in 1 .. i - 1 loop
                if v_status[j] = 'held' and p_keys[j] = p_keys[i] and p_accounts[j] = p_accounts[i] then
                    v_status[i] := 'replayed';
                    v_hold[i] := v_hold[j];
                    v_replayed_from[i] := j;
                    exit;
                end if;
            end loop;
            -- in an earlier call?
            if v_status[i] is null then
                select * into h from holds
                 where resource_id = p_resource and account_id = p_accounts[i]
                   and idempotency_key = p_keys[i];
                if found then
                    v_status[i] := 'replayed';
                    v_hold[i] := h.id;
                    -- answered as the row is now, before a later request's
                    -- lazy expiry could change it
                    v_replies[i] := hf_hold_row('replayed', h, v_available);
                end if;
            end if;
            if v_status[i] is not null then
                v_left[i] := v_available;
                continue;
            end if;
        end if;

        -- expired holds count as free: look once, when needed and due
        if v_available < p_qtys[i] and not v_swept and r.next_expiry <= v_now then
            perform hf_expire_due_plain(p_resource, v_now, 'lazy-expiry', null);
            v_swept := true;
            select * into r from resources where id = p_resource;
            -- the counters do not include this batch's grants yet
            v_available := r.total - r.held - r.sold - v_granted;
        end if;

        if v_available < p_qtys[i] then
            v_status[i] := 'insufficient';
            v_left[i] := v_available;
            continue;
        end if;

        if s.account_cap is not null then
            select coalesce(sum(qty), 0) into v_mine from holds
             where account_id = p_accounts[i]
               and (s.cap_scope = 'global' or resource_id = p_resource)
               and (state = 'awaiting_payment' or (state = 'held' and expires_at > v_now));
            -- and what this batch already granted the same account
            for j in 1 .. i - 1 loop
                if v_status[j] = 'held' and p_accounts[j] = p_accounts[i] then
                    v_mine := v_mine + p_qtys[j];
                end if;
            end loop;
            if v_mine + p_qtys[i] > s.account_cap then
                v_status[i] := 'account_cap';
                v_left[i] := greatest(s.account_cap - v_mine, 0);
                continue;
            end if;
        end if;

        v_status[i] := 'held';
        v_hold[i] := hf_uuid_v7();
        v_granted := v_granted + p_qtys[i];
        v_available := v_available - p_qtys[i];
        v_left[i] := v_available;
    end loop;

    if v_granted > 0 then
        insert into holds (id, resource_id, account_id, qty, idempotency_key, expires_at)
        select v_hold[i], p_resource, p_accounts[i], p_qtys[i], p_keys[i], v_now + v_ttl
          from generate_subscripts(p_qtys, 1) as i
         where v_status[i] = 'held';
        insert into hold_events (hold_id, kind, to_state, actor, detail)
        select v_hold[i], 'held', 'held', p_accounts[i],
               jsonb_build_object('qty', p_qtys[i], 'ttl_seconds', extract(epoch from v_ttl))
          from generate_subscripts(p_qtys, 1) as i
         where v_status[i] = 'held';
        -- one counter update for the batch; the CHECK still has the last word
        update resources
           set held = held + v_granted,
               next_expiry = least(next_expiry, v_now + v_ttl),
               updated_at = v_now
         where id = p_resource;
    end if;

    -- the answers, in the order asked
    for i in 1 .. v_n loop
        res := null;
        if v_status[i] = 'held' then
            -- a fresh row: its every column is known here
            res.status := 'held';
            res.hold_id := v_hold[i];
            res.resource_id := p_resource;
            res.account_id := p_accounts[i];
            res.qty := p_qtys[i];
            res.state := 'held';
            res.expires_at := v_now + v_ttl;
            res.available := v_left[i];
            res.extensions := 0;
        elsif v_status[i] = 'replayed' and v_replayed_from[i] is not null then
            -- a key repeated in this batch: its first request's fresh row
            res.status := 'replayed';
            res.hold_id := v_hold[i];
            res.resource_id := p_resource;
            res.account_id := p_accounts[i];
            res.qty := p_qtys[v_replayed_from[i]];
            res.state := 'held';
            res.expires_at := v_now + v_ttl;
            res.available := v_left[i];
            res.extensions := 0;
        elsif v_status[i] = 'replayed' then
            res := v_replies[i];
        else
            res.status := v_status[i];
            res.resource_id := p_resource;
            res.account_id := p_accounts[i];
            res.qty := p_qtys[i];
            res.available := v_left[i];
        end if;
        return next res;
    end loop;
    return;
end;
$function$;

-- hf_hold_row (last written by 0002_inventory_functions.sql)
CREATE OR REPLACE FUNCTION public.hf_hold_row(p_status text, h holds, p_available integer)
 RETURNS hold_result
 LANGUAGE sql
 IMMUTABLE
AS $function$
    select p_status, h.id, h.resource_id, h.account_id, h.qty, h.state, h.expires_at,
           h.payment_deadline, h.payment_ref, null::text, null::uuid, p_available, h.extensions;
$function$;

-- hf_item_state_guard (last written by 0200_items.sql)
CREATE OR REPLACE FUNCTION public.hf_item_state_guard()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
    if new.state is distinct from old.state
       and not (old.state = 'valid' or (old.state = 'used' and new.state = 'refunded')) then
        raise exception 'an item % cannot go from % to %', old.id, old.state, new.state
            using errcode = 'check_violation', constraint = 'item_state_one_way';
    end if;
    if (new.code, new.order_id, new.product_id) is distinct from
       (old.code, old.order_id, old.product_id) then
        raise exception 'an item''s code, order and product never change'
            using errcode = 'check_violation', constraint = 'item_state_one_way';
    end if;
    return new;
end;
$function$;

-- hf_limit_lock (last written by 0011_fair_sale.sql)
CREATE OR REPLACE FUNCTION public.hf_limit_lock(p_key text)
 RETURNS void
 LANGUAGE sql
AS $function$
    select pg_advisory_xact_lock(hashtextextended('holdfast.limit:' || p_key, 0));
$function$;

-- hf_line_shape (last written by 0013_one_engine.sql)
CREATE OR REPLACE FUNCTION public.hf_line_shape(h holds, p_now timestamp with time zone)
 RETURNS purchase_shape
 LANGUAGE sql
 IMMUTABLE
AS $function$
    select 1,
           (h.state = 'confirmed')::integer,
           (h.state = 'released')::integer,
           (h.state = 'expired')::integer,
           (h.state = 'awaiting_payment')::integer,
           (h.state = 'held')::integer,
           (h.state = 'held' and h.expires_at <= p_now)::integer,
           (h.state = 'awaiting_payment' and h.payment_deadline <= p_now)::integer,
           coalesce(h.extensions, 0);
$function$;

-- hf_line_waits (last written by 0073_waitlist_line_rules.sql)
CREATE OR REPLACE FUNCTION public.hf_line_waits(p_resource text, p_now timestamp with time zone)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
    select exists (select 1 from waitlist_entries w
                     join products p on p.id = w.product_id
                    where p.resource_id = p_resource and w.state = 'waiting'
                      and p.active and p.archived_at is null
                      and (p.sale_closes_at is null or p.sale_closes_at > p_now))
        or exists (select 1 from products p
                    where p.resource_id = p_resource and p.queue_commitment is not null
                      and p.queue_drawn_at is null and p.active and p.archived_at is null);
$function$;

-- hf_lock_purchase (last written by 0002_inventory_functions.sql)
CREATE OR REPLACE FUNCTION public.hf_lock_purchase(p_id uuid)
 RETURNS uuid
 LANGUAGE plpgsql
AS $function$
declare
    v_purchase uuid;
begin
    select purchase_id into v_purchase from holds where id = p_id;
    if not found then
        select purchase_id into v_purchase from holds where purchase_id = p_id limit 1;
        if not found then
            return null;
        end if;
    end if;
    -- lock: every resource of the purchase, ascending id
    perform 1 from resources
      where id in (select resource_id from holds where purchase_id = v_purchase)
      order by id
      for no key update;
    return v_purchase;
end;
$function$;

-- hf_minutes (last written by 0161_tables_fill.sql)
CREATE OR REPLACE FUNCTION public.hf_minutes(p interval)
 RETURNS numeric
 LANGUAGE sql
 IMMUTABLE
AS $function$
    select extract(epoch from p) / 60;
$function$;

-- hf_move_booking (last written by 0260_walk_ins.sql)
CREATE OR REPLACE FUNCTION public.hf_move_booking(p_hold uuid, p_set text)
 RETURNS text
 LANGUAGE plpgsql
AS $function$
declare
    b      bookings;
    v_set  record;
    v_during tstzrange;
begin
    select * into b from bookings where hold_id = p_hold;
    if not found then
        return 'not_found';
    end if;
    -- lock: the hold's resource, then the room (the engine's order)
    perform 1 from resources r join holds h on h.resource_id = r.id
      where h.id = p_hold for no key update of r;
    perform 1 from dining_rooms where collection = b.room for no key update;
    -- under the locks: a booking marked a no-show meanwhile has ended
    -- its stay, and a move would give it back
    if not exists (select 1 from table_pins where hold_id = p_hold and live)
       or exists (select 1 from bookings where hold_id = p_hold and no_show_at is not null) then
        return 'ended';
    end if;
    v_during := tstzrange(b.starts_at, b.ends_at, '[)');
    if not exists (select 1 from dining_tables where room = b.room and id = p_set and archived_at is null)
       and not exists (select 1 from dining_joins where room = b.room and id = p_set and archived_at is null) then
        return 'unknown_set';
    end if;
    select f.* into v_set from hf_free_sets(b.room, b.party, v_during, p_hold) f where f.set_id = p_set;
    if not found then
        -- it exists: either the party does not fit it or it is taken
        if exists (select 1 from hf_free_sets(b.room, b.party, tstzrange('1900-01-01', '1900-01-02'), p_hold) f
                    where f.set_id = p_set) then
            return 'not_free';
        end if;
        return 'does_not_fit';
    end if;
    if v_set.tables = b.tables then
        return 'same';
    end if;
    delete from table_pins where hold_id = p_hold;
    insert into table_pins (hold_id, room, table_id, during)
    select p_hold, b.room, x.id, v_during from unnest(v_set.tables) as x(id);
    update bookings set tables = v_set.tables where hold_id = p_hold;
    -- the shop's memory of the room's day reads again: a change of the
    -- time's counters row says so
    update resources r set held = r.held from holds h where h.id = p_hold and r.id = h.resource_id;
    return 'moved';
end;
$function$;

-- hf_notify_catalogue (last written by 0014_live_stock.sql)
CREATE OR REPLACE FUNCTION public.hf_notify_catalogue()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
    perform pg_notify('hf_catalogue', '');
    return null;
end;
$function$;

-- hf_notify_stock (last written by 0014_live_stock.sql)
CREATE OR REPLACE FUNCTION public.hf_notify_stock()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
    perform pg_notify('hf_stock', new.id);
    return null;
end;
$function$;

-- hf_offer (last written by 0196_hand_over_once.sql)
CREATE OR REPLACE FUNCTION public.hf_offer(p_resource text, p_entry uuid, p_unit_minor bigint, p_until timestamp with time zone, p_now timestamp with time zone, p_seats bigint[])
 RETURNS uuid
 LANGUAGE plpgsql
AS $function$
declare
    e       record;
    v_hold  uuid := hf_uuid_v7();
    v_order uuid := gen_random_uuid();
begin
    select w.id, w.qty, w.name, w.email, w.email_key, w.provider, w.client_address,
           p.id as product_id, p.name as product_name, p.currency
      into e
      from waitlist_entries w join products p on p.id = w.product_id
     where w.id = p_entry;
    insert into holds (id, resource_id, account_id, qty, expires_at)
    values (v_hold, p_resource, 'waitlist:' || e.id, e.qty, p_until);
    insert into hold_events (hold_id, kind, to_state, actor, detail)
    values (v_hold, 'held', 'held', 'waitlist',
            jsonb_build_object('qty', e.qty, 'entry', e.id,
                               'ttl_seconds', extract(epoch from p_until - p_now)::integer));
    update resources
       set held = held + e.qty, next_expiry = least(next_expiry, p_until), updated_at = p_now
     where id = p_resource;
    insert into orders (id, token, checkout_key, customer_name, customer_email, currency,
                        amount_minor, provider, email_key, client_address, hold_id)
    values (v_order, replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', ''),
            'waitlist-' || e.id, e.name, e.email, e.currency, p_unit_minor * e.qty,
            e.provider, e.email_key, e.client_address, v_hold);
    insert into order_lines (order_id, product_id, name, qty, unit_price_minor, paid_minor)
    values (v_order, e.product_id, e.product_name, e.qty, p_unit_minor, p_unit_minor * e.qty);
    if p_seats is not null then
        perform hf_seat_pin(v_hold, p_seats);
        perform hf_seat_name_line(v_order, e.product_id, p_seats);
    end if;
    perform 1 from hf_seat_party(v_order, v_hold, p_resource, e.product_id, e.qty);
    update waitlist_entries
       set state = 'offered', offered_at = p_now, offer_expires_at = p_until, order_id = v_order
     where id = e.id;
    insert into outbox_jobs (kind, dedupe_key, payload)
    values ('waitlist_mail', 'waitlist_offer:' || e.id,
            jsonb_build_object('entry_id', e.id, 'what', 'offer'))
    on conflict (dedupe_key) do nothing;
    perform hf_webhook_event('waitlist.offered',
                             jsonb_build_object('entry_id', e.id, 'product_id', e.product_id,
                                                'qty', e.qty, 'claim_until', p_until,
                                                'order', hf_webhook_order(v_order)));
    return v_order;
end;
$function$;

-- hf_order_number (last written by 0102_order_numbers.sql)
CREATE OR REPLACE FUNCTION public.hf_order_number()
 RETURNS text
 LANGUAGE plpgsql
AS $function$
declare
    v_hex text;
    v_number text;
begin
    loop
        v_hex := upper(substr(replace(gen_random_uuid()::text, '-', ''), 1, 12));
        v_number := substr(v_hex, 1, 4) || '-' || substr(v_hex, 5, 4) || '-' || substr(v_hex, 9, 4);
        exit when not exists (select 1 from orders o where o.number = v_number);
    end loop;
    return v_number;
end;
$function$;

-- hf_order_view (last written by 0197_late_refunds_counted.sql)
CREATE OR REPLACE FUNCTION public.hf_order_view(p_order uuid)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
    select hf_webhook_order(o.id)
           || jsonb_build_object(
                  'settling', case when o.settle_method is not null
                                   then jsonb_build_object('method', o.settle_method,
                                                           'until', o.settling_until) end,
                  'late_money', o.late_money,
                  'refunded_minor', o.refunded_minor)
      from orders o where o.id = p_order
$function$;

-- hf_payment_may_start (last written by 0013_one_engine.sql)
CREATE OR REPLACE FUNCTION public.hf_payment_may_start(p_purchase uuid, p_shape purchase_shape, p_now timestamp with time zone)
 RETURNS text
 LANGUAGE plpgsql
AS $function$
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
$function$;

-- hf_purchase_live (last written by 0011_fair_sale.sql)
CREATE OR REPLACE FUNCTION public.hf_purchase_live(p_purchase uuid)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
    select exists (select 1 from holds h
                    where h.purchase_id = p_purchase
                      and h.state in ('held', 'awaiting_payment')
                      and coalesce(h.payment_deadline, h.expires_at) > now());
$function$;

-- hf_purchase_row (last written by 0002_inventory_functions.sql)
CREATE OR REPLACE FUNCTION public.hf_purchase_row(p_status text, p_purchase uuid, p_payment_ref text, p_existing_ref text, p_other uuid)
 RETURNS hold_result
 LANGUAGE sql
 STABLE
AS $function$
    select p_status, p_purchase,
           case when count(distinct h.resource_id) = 1 then min(h.resource_id) end,
           min(h.account_id), sum(h.qty)::integer,
           case when count(distinct h.state) = 1 then min(h.state) else 'mixed' end,
           min(h.expires_at), min(h.payment_deadline),
           coalesce(p_payment_ref, max(h.payment_ref)), p_existing_ref, p_other,
           null::integer, max(h.extensions)
      from holds h
     where h.purchase_id = p_purchase;
$function$;

-- hf_purchase_shape (last written by 0002_inventory_functions.sql)
CREATE OR REPLACE FUNCTION public.hf_purchase_shape(p_purchase uuid, p_now timestamp with time zone)
 RETURNS purchase_shape
 LANGUAGE sql
 STABLE
AS $function$
    select count(*)::integer,
           count(*) filter (where state = 'confirmed')::integer,
           count(*) filter (where state = 'released')::integer,
           count(*) filter (where state = 'expired')::integer,
           count(*) filter (where state = 'awaiting_payment')::integer,
           count(*) filter (where state = 'held')::integer,
           count(*) filter (where state = 'held' and expires_at <= p_now)::integer,
           count(*) filter (where state = 'awaiting_payment' and payment_deadline <= p_now)::integer,
           coalesce(max(extensions), 0)::integer
      from holds
     where purchase_id = p_purchase;
$function$;

-- hf_redeem (last written by 0200_items.sql)
CREATE OR REPLACE FUNCTION public.hf_redeem(p_code text, p_by text, p_place text, p_attempt uuid DEFAULT NULL::uuid, p_checks text[] DEFAULT NULL::text[], p_override boolean DEFAULT false)
 RETURNS TABLE(outcome text, kind text, product_kind text, order_id uuid, customer_name text, what text, redeemed_at timestamp with time zone, redeemed_by text, place text, for_title text, for_tier text, for_starts timestamp with time zone, overridden boolean)
 LANGUAGE plpgsql
AS $function$
declare
    v_order uuid;
    v_state text;
    v_name text;
    v_here boolean;
    v_items bigint[];
    v_kind text;
    v_product_kind text;
    v_what text;
    v_title text;
    v_tier text;
    v_starts timestamptz;
    v_live integer;
    v_used integer;
    v_cancelled integer;
    r redemptions;
begin
    if p_by is null or length(p_by) not between 1 and 254 then
        perform hf_bad_input('who redeems must be named (1 to 254 characters)');
    end if;
    if p_place is null or length(p_place) > 100 then
        perform hf_bad_input('the place is at most 100 characters');
    end if;
    -- unlocked: which order a code belongs to never changes
    if p_code is not null and length(p_code) between 1 and 64 then
        select i.order_id into v_order from order_items i where i.code = p_code limit 1;
    end if;
    if v_order is null then
        return query select 'not_valid', null::text, null::text, null::uuid, null::text,
                            null::text, null::timestamptz, null::text, null::text,
                            null::text, null::text, null::timestamptz, false;
        return;
    end if;
    -- lock: the order, shared (a refund or a guest's cancel holds it
    -- exclusively, so an item is never redeemed and refunded at once)
    select o.state, o.customer_name into v_state, v_name from orders o where o.id = v_order for share;
    v_here := p_checks is null
              or exists (select 1 from order_items i
                          where i.code = p_code and i.product_id = any (p_checks));
    -- the items in question: this door's, or all of the code's when none is
    select array_agg(i.id order by i.id) into v_items
      from order_items i
     where i.code = p_code and (not v_here or p_checks is null or i.product_id = any (p_checks));
    select k.code, p.kind, co.title, p.name || coalesce(', seat ' || s.label, ''),
           coalesce(p.starts_at, co.starts_at)
      into v_kind, v_product_kind, v_title, v_tier, v_starts
      from order_items i join products p on p.id = i.product_id
      join product_kinds k on k.kind = p.kind
      join collections co on co.id = p.collection
      left join seats s on s.id = i.seat_id
     where i.id = v_items[1];
    select string_agg(w.words, ', ' order by w.id) into v_what
      from (select i.id,
                   coalesce(p.name || ', seat ' || s.label, l.name, p.name)
                   || case when i.seat_id is null and l.qty - l.refunded_qty > 1
                                and not exists (select 1 from order_items j
                                                 where j.order_id = i.order_id
                                                   and j.product_id = i.product_id
                                                   and j.id <> i.id)
                           then ' × ' || (l.qty - l.refunded_qty) else '' end as words
              from order_items i join products p on p.id = i.product_id
              left join order_lines l on l.order_id = i.order_id and l.product_id = i.product_id
              left join seats s on s.id = i.seat_id
             where i.id = any (v_items)) w;
    -- this very scan, run again after its commit's answer was lost: it
    -- redeemed, and says so again
    if p_attempt is not null then
        select * into r from redemptions x
         where x.item_id = any (v_items) and x.attempt = p_attempt
         order by x.item_id limit 1;
        if found then
            return query select 'redeemed', v_kind, v_product_kind, v_order, v_name, v_what,
                                r.redeemed_at, r.redeemed_by, r.place,
                                v_title, v_tier, v_starts, r.overridden;
            return;
        end if;
    end if;
    if v_state in ('refund_pending', 'refunded') then
        return query select 'refunded', v_kind, v_product_kind, v_order, v_name, v_what,
                            null::timestamptz, null::text, null::text,
                            v_title, v_tier, v_starts, false;
        return;
    end if;
    if v_state <> 'paid' then
        return query select 'not_paid', v_kind, v_product_kind, v_order, v_name, v_what,
                            null::timestamptz, null::text, null::text,
                            v_title, v_tier, v_starts, false;
        return;
    end if;
    -- the latest use of the items in question, for the answers that name it
    select * into r from redemptions x where x.item_id = any (v_items)
     order by x.redeemed_at desc, x.item_id limit 1;
    -- another event's, another day's: not this door's, unless someone
    -- who may says so
    if not v_here and not coalesce(p_override, false) then
        return query select 'not_this_door', v_kind, v_product_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place,
                            v_title, v_tier, v_starts, false;
        return;
    end if;
    select count(*) filter (where i.state = 'valid'), count(*) filter (where i.state = 'used'),
           count(*) filter (where i.state = 'cancelled')
      into v_live, v_used, v_cancelled
      from order_items i where i.id = any (v_items);
    if v_live = 0 then
        return query select case when v_used > 0 then 'already_used'
                                 when v_cancelled > 0 then 'cancelled'
                                 else 'refunded' end,
                            v_kind, v_product_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place,
                            v_title, v_tier, v_starts, coalesce(r.overridden, false);
        return;
    end if;
    -- each valid item once: two doors at one moment meet at the primary
    -- key, in the items' order, and the later finds them used
    with fresh as (
        insert into redemptions (code, order_id, kind, redeemed_by, place, attempt, overridden,
                                 item_id)
        select p_code, v_order, p.kind, p_by, p_place, p_attempt, not v_here, i.id
          from order_items i join products p on p.id = i.product_id
         where i.id = any (v_items) and i.state = 'valid'
         order by i.id
        on conflict on constraint redemptions_pkey do nothing
        returning *
    ), marked as (
        update order_items i set state = 'used', state_at = f.redeemed_at
          from fresh f where i.id = f.item_id
        returning f.*
    )
    select m.* into r from marked m order by m.item_id limit 1;
    if r.item_id is not null then
        return query select 'redeemed', v_kind, v_product_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place,
                            v_title, v_tier, v_starts, r.overridden;
        return;
    end if;
    -- another door won the same moment
    select * into r from redemptions x where x.item_id = any (v_items)
     order by x.redeemed_at desc, x.item_id limit 1;
    return query select 'already_used', v_kind, v_product_kind, v_order, v_name, v_what,
                        r.redeemed_at, r.redeemed_by, r.place,
                        v_title, v_tier, v_starts, r.overridden;
end;
$function$;

-- hf_release (last written by 0002_inventory_functions.sql)
CREATE OR REPLACE FUNCTION public.hf_release(p_id uuid, p_reason text DEFAULT 'released'::text, p_actor text DEFAULT 'shopper'::text)
 RETURNS hold_result
 LANGUAGE plpgsql
AS $function$
declare
    v_purchase uuid;
    v_now timestamptz;
    v_shape purchase_shape;
    res hold_result;
begin
    if p_reason is null or length(p_reason) not between 1 and 500 then
        perform hf_bad_input('release reason must be 1 to 500 characters');
    end if;
    if p_actor is null or length(p_actor) not between 1 and 200 then
        perform hf_bad_input('actor must be 1 to 200 characters');
    end if;

    v_purchase := hf_lock_purchase(p_id);
    if v_purchase is null then
        res.status := 'not_found';
        res.hold_id := p_id;
        return res;
    end if;
    v_now := clock_timestamp();
    v_shape := hf_purchase_shape(v_purchase, v_now);

    if v_shape.confirmed > 0 then
        return hf_purchase_row('confirmed', v_purchase, null, null, null);
    end if;
    if v_shape.released > 0 then
        perform hf_end_purchase(v_purchase, 'released', v_now, p_actor, p_reason);
        return hf_purchase_row('already_released', v_purchase, null, null, null);
    end if;
    if v_shape.expired > 0 or v_shape.plain_due > 0 or v_shape.paying_due > 0 then
        perform hf_settle_ended(v_purchase, v_shape, v_now);
        return hf_purchase_row('expired', v_purchase, null, null, null);
    end if;

    perform hf_end_purchase(v_purchase, 'released', v_now, p_actor, p_reason);
    return hf_purchase_row('released', v_purchase, null, null, null);
end;
$function$;

-- hf_release_aside (last written by 0073_waitlist_line_rules.sql)
CREATE OR REPLACE FUNCTION public.hf_release_aside(p_resource text, p_now timestamp with time zone)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
declare
    v_aside holds;
begin
    select * into v_aside from holds
     where account_id = 'waitlist-line' and resource_id = p_resource and state = 'held'
     for update;
    if not found then
        return 0;
    end if;
    update holds set state = 'released', ended_at = p_now, ended_by = 'waitlist',
                     end_reason = 'waitlist_regrouped'
     where id = v_aside.id;
    insert into hold_events (hold_id, kind, from_state, to_state, actor, detail)
    values (v_aside.id, 'released', 'held', 'released', 'waitlist',
            jsonb_build_object('reason', 'waitlist_regrouped'));
    update resources set held = held - v_aside.qty, updated_at = p_now where id = p_resource;
    return v_aside.qty;
end;
$function$;

-- hf_repair (last written by 0012_after_the_sale.sql)
CREATE OR REPLACE FUNCTION public.hf_repair(p_resource text)
 RETURNS TABLE(resource_id text, held_before integer, sold_before integer, held_after integer, sold_after integer, repaired boolean)
 LANGUAGE plpgsql
AS $function$
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
$function$;

-- hf_return (last written by 0070_waiting_list.sql)
CREATE OR REPLACE FUNCTION public.hf_return(p_hold uuid, p_qty integer, p_restock boolean, p_actor text, p_reason text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
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
    if p_restock then
        perform hf_hand_over(h.resource_id, clock_timestamp());
    end if;
end;
$function$;

-- hf_seat_best (last written by 0181_seat_chooser.sql)
CREATE OR REPLACE FUNCTION public.hf_seat_best(p_section text, p_qty integer, p_exclude bigint[])
 RETURNS bigint[]
 LANGUAGE plpgsql
 STABLE
AS $function$
declare
    v_last integer;
    v_from integer := 1;
    v_depth integer := 4;
    v_best bigint[];
    v_orphans integer;
    v_ids bigint[];
    v_left integer;
begin
    if (select chooser from seat_sections where product_id = p_section) = 'first_fit' then
        with free as (
            select s.id, s.row_rank, s.run, s.pos,
                   s.pos - row_number() over (partition by s.run order by s.pos) as grp
              from seats s
             where s.section = p_section and s.state = 'open' and s.access = 'none'
               and s.id not in (select unnest(coalesce(p_exclude, '{}')))
               and not exists (select 1 from seat_pins p where p.seat_id = s.id and p.live)
        ), way as (
            select f.run, f.row_rank, f.pos as first,
                   lead(f.pos, p_qty - 1) over (partition by f.run, f.grp order by f.pos) as last
              from free f
        ), pick as (
            select * from way where last is not null order by row_rank, run, first limit 1
        )
        select array_agg(f.id order by f.pos) into v_ids
          from free f, pick w
         where f.run = w.run and f.pos between w.first and w.last;
        return v_ids;
    end if;
    select max(row_rank) into v_last from seats where section = p_section;
    while v_from <= coalesce(v_last, 0) loop
        select w.seat_ids, w.orphans into v_ids, v_left
          from hf_seat_stretches(p_section, p_qty, p_exclude, null, 1, v_from, v_from + v_depth - 1) w;
        if v_ids is not null and (v_best is null or v_left < v_orphans) then
            v_best := v_ids;
            v_orphans := v_left;
        end if;
        exit when v_orphans = 0;
        v_from := v_from + v_depth;
        v_depth := v_depth * 2;
    end loop;
    return v_best;
end;
$function$;

-- hf_seat_choose (last written by 0210_one_checkout_path.sql)
CREATE OR REPLACE FUNCTION public.hf_seat_choose(p_resource text, p_labels text[], p_qty integer, p_together boolean, p_exclude bigint[])
 RETURNS TABLE(status text, seat_ids bigint[], labels text[], taken text[], offers jsonb, split_allowed boolean, free integer)
 LANGUAGE plpgsql
 STABLE
AS $function$
declare
    v_section seat_sections;
    v_ids bigint[];
    v_free integer;
    v_split boolean;
    v_need integer;
    v_piece bigint[];
    v_pieces bigint[] := '{}';
    v_size integer;
    v_near point;
    v_unknown text[];
    v_taken text[];
begin
    v_section := hf_seat_section(p_resource);
    if v_section.product_id is null then
        perform hf_bad_input(format('%s is not a seated section', p_resource));
    end if;
    -- the section's free seats are its counters' (held + sold: its live
    -- pins; the drift check holds them to it), less what the caller chose
    select r.total - r.held - r.sold - coalesce(cardinality(p_exclude), 0) into v_free
      from resources r where r.id = p_resource;
    if p_labels is not null then
        if cardinality(p_labels) not between 1 and 100 then
            perform hf_bad_input('name 1 to 100 seats');
        end if;
        select array_agg(l order by l) into v_unknown
          from unnest(p_labels) l
         where not exists (select 1 from seats s where s.section = v_section.product_id and s.label = l);
        if v_unknown is not null then
            return query select 'unknown_seats', null::bigint[], null::text[], v_unknown,
                                '[]'::jsonb, null::boolean, v_free;
            return;
        end if;
        select array_agg(s.id order by s.row_rank, s.run, s.pos),
               array_agg(s.label order by s.row_rank, s.run, s.pos)
                   filter (where s.state <> 'open' or s.id = any (coalesce(p_exclude, '{}'))
                                 or exists (select 1 from seat_pins p
                                             where p.seat_id = s.id and p.live))
          into v_ids, v_taken
          from seats s
         where s.section = v_section.product_id and s.label = any (p_labels);
        if v_taken is null then
            return query select 'chosen', v_ids, (select array_agg(s.label order by s.row_rank, s.run, s.pos)
                                                    from seats s where s.id = any (v_ids)),
                                null::text[], null::jsonb, null::boolean, v_free;
            return;
        end if;
        -- the nearest seats together instead, as many as were asked for
        select point(avg(s.x), avg(s.y)) into v_near from seats s where s.id = any (v_ids);
        return query
            select 'seats_taken', null::bigint[], null::text[], v_taken,
                   coalesce((select jsonb_agg(to_jsonb((select array_agg(s.label order by s.pos)
                                                          from seats s where s.id = any (w.seat_ids))))
                               from hf_seat_stretches(v_section.product_id, cardinality(v_ids),
                                                      p_exclude, v_near, 3) w), '[]'::jsonb),
                   null::boolean, v_free;
        return;
    end if;

    if p_qty is null or p_qty not between 1 and 100 then
        perform hf_bad_input('ask for 1 to 100 seats');
    end if;
    if v_free < p_qty then
        return query select 'sold_out', null::bigint[], null::text[], null::text[], '[]'::jsonb,
                            null::boolean, v_free;
        return;
    end if;
    v_ids := hf_seat_best(v_section.product_id, p_qty, p_exclude);
    if v_ids is not null then
        return query select 'chosen', v_ids,
                            (select array_agg(s.label order by s.row_rank, s.run, s.pos)
                               from seats s where s.id = any (v_ids)),
                            null::text[], null::jsonb, null::boolean, v_free;
        return;
    end if;
    -- no stretch holds them all: the best split, as few groups as can be,
    -- each the longest stretch left (the best way, when it is longer)
    v_need := p_qty;
    while v_need > 0 loop
        select max(cnt) into v_size
          from (select count(*) as cnt
                  from (select s.run, s.pos - row_number() over (partition by s.run order by s.pos) as grp
                          from seats s
                         where s.section = v_section.product_id and s.state = 'open'
                           and s.access = 'none'
                           and s.id not in (select unnest(coalesce(p_exclude, '{}') || v_pieces))
                           and not exists (select 1 from seat_pins p
                                            where p.seat_id = s.id and p.live)) f
                 group by run, grp) g;
        exit when v_size is null;
        v_piece := hf_seat_best(v_section.product_id, least(v_size, v_need),
                                coalesce(p_exclude, '{}') || v_pieces);
        exit when v_piece is null;
        v_pieces := v_pieces || v_piece;
        v_need := v_need - cardinality(v_piece);
    end loop;
    if v_need > 0 then
        return query select 'sold_out', null::bigint[], null::text[], null::text[], '[]'::jsonb,
                            null::boolean, v_free;
        return;
    end if;
    select s.splits into v_split from seating_settings s;
    v_split := coalesce(v_split, false);
    if v_split and not p_together then
        return query select 'chosen', v_pieces,
                            (select array_agg(s.label order by s.row_rank, s.run, s.pos)
                               from seats s where s.id = any (v_pieces)),
                            null::text[], null::jsonb, true, v_free;
        return;
    end if;
    return query select 'not_together', null::bigint[], null::text[], null::text[],
                        jsonb_build_array((select jsonb_agg(s.label order by s.row_rank, s.run, s.pos)
                                             from seats s where s.id = any (v_pieces))),
                        v_split, v_free;
end;
$function$;

-- hf_seat_codes (last written by 0200_items.sql)
CREATE OR REPLACE FUNCTION public.hf_seat_codes()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
    if not exists (select 1 from inserted i join seat_sections s on s.product_id = i.product_id) then
        return null;
    end if;
    update order_items c
       set seat_id = x.seat_id
      from (select i.id, s.seat_id
              from (select i.id, i.order_id, i.product_id,
                           row_number() over (partition by i.order_id, i.product_id
                                              order by i.code) as n
                      from inserted i
                      join seat_sections sec on sec.product_id = i.product_id
                     where i.seat_id is null) i
              join (select o.id as order_id, sec.product_id, p.seat_id,
                           row_number() over (partition by o.id, sec.product_id
                                              order by st.row_rank, st.run, st.pos) as n
                      from orders o
                      join holds h on h.purchase_id = o.hold_id
                      join seat_sections sec on sec.resource_id = h.resource_id
                      join seat_pins p on p.hold_id = h.id and p.live
                      join seats st on st.id = p.seat_id
                     where o.id in (select order_id from inserted)
                       and not exists (select 1 from order_items c2
                                        where c2.seat_id = p.seat_id and c2.order_id = o.id
                                          and c2.state in ('valid', 'used'))) s
                on s.order_id = i.order_id and s.product_id = i.product_id and s.n = i.n) x
     where c.id = x.id;
    return null;
end;
$function$;

-- hf_seat_expire_due (last written by 0180_seating.sql)
CREATE OR REPLACE FUNCTION public.hf_seat_expire_due(p_resource text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
declare
    v_now timestamptz := clock_timestamp();
begin
    if (select r.next_expiry <= v_now from resources r where r.id = p_resource) then
        perform hf_expire_due_plain(p_resource, v_now, 'lazy-expiry', null);
    end if;
end;
$function$;

-- hf_seat_keep_pinned (last written by 0180_seating.sql)
CREATE OR REPLACE FUNCTION public.hf_seat_keep_pinned()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
    if exists (select 1 from seat_pins p where p.seat_id = old.id and p.live) then
        raise exception 'seat % is held or sold: it keeps its place on sale', old.label
            using errcode = 'check_violation', constraint = 'seat_pinned_stays';
    end if;
    return new;
end;
$function$;

-- hf_seat_name_line (last written by 0180_seating.sql)
CREATE OR REPLACE FUNCTION public.hf_seat_name_line(p_order uuid, p_product text, p_seat_ids bigint[])
 RETURNS void
 LANGUAGE sql
AS $function$
    update order_lines
       set name = name || ' — ' || hf_seat_words(p_seat_ids)
     where order_id = p_order and product_id = p_product
$function$;

-- hf_seat_party (last written by 0160_tables.sql)
CREATE OR REPLACE FUNCTION public.hf_seat_party(p_order uuid, p_purchase uuid, p_resource text, p_product text, p_party integer)
 RETURNS TABLE(tables text[], starts_at timestamp with time zone, ends_at timestamp with time zone)
 LANGUAGE plpgsql
AS $function$
declare
    v     record;
    v_set record;
    v_hold uuid;
    v_during tstzrange;
begin
    select * into v from hf_table_terms(p_product, p_party);
    if not found then
        return;
    end if;
    select h.id into v_hold from holds h
     where h.purchase_id = p_purchase and h.resource_id = p_resource
       and h.state in ('held', 'awaiting_payment')
     order by h.created_at desc, h.id desc
     limit 1;
    if v_hold is null then
        return;
    end if;
    v_during := tstzrange(v.starts_at, v.starts_at + v.turn, '[)');
    -- lock: the room
    perform 1 from dining_rooms where collection = v.room for no key update;
    select f.set_id, f.tables into v_set from hf_free_sets(v.room, p_party, v_during, null) f limit 1;
    if not found then
        return;
    end if;
    insert into table_pins (hold_id, room, table_id, during)
    select v_hold, v.room, x.id, v_during from unnest(v_set.tables) as x(id);
    insert into bookings (hold_id, order_id, room, product_id, party, starts_at, ends_at, tables,
                          deposit_per_cover_minor, cancel_until)
    values (v_hold, p_order, v.room, p_product, p_party, lower(v_during), upper(v_during),
            v_set.tables, v.deposit_per_cover, v.cancel_until);
    return query select v_set.tables, lower(v_during), upper(v_during);
end;
$function$;

-- hf_seat_pin (last written by 0180_seating.sql)
CREATE OR REPLACE FUNCTION public.hf_seat_pin(p_hold uuid, p_seat_ids bigint[])
 RETURNS void
 LANGUAGE sql
AS $function$
    insert into seat_pins (seat_id, hold_id) select unnest(p_seat_ids), p_hold
$function$;

-- hf_seat_pins_end (last written by 0180_seating.sql)
CREATE OR REPLACE FUNCTION public.hf_seat_pins_end()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
    update seat_pins
       set live = false, ended_at = coalesce(new.ended_at, clock_timestamp()),
           end_reason = new.state
     where hold_id = new.id and live;
    return null;
end;
$function$;

-- hf_seat_pins_guard (last written by 0230_seats_chosen_together.sql)
CREATE OR REPLACE FUNCTION public.hf_seat_pins_guard()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
declare
    v record;
begin
    select s.label, s.state, x.product_id is null as elsewhere,
           h.state not in ('held', 'awaiting_payment', 'confirmed') or not n.live as dead
      into v
      from inserted n
      join seats s on s.id = n.seat_id
      join holds h on h.id = n.hold_id
      left join seat_sections x on x.product_id = s.section and x.resource_id = h.resource_id
     where s.state <> 'open' or x.product_id is null
        or h.state not in ('held', 'awaiting_payment', 'confirmed') or not n.live
     order by s.state = 'open', x.product_id is not null
     limit 1;
    if not found then
        return null;
    elsif v.state <> 'open' then
        raise exception 'seat % is not on sale (%)', v.label, v.state
            using errcode = 'check_violation', constraint = 'seat_pin_on_sale';
    elsif v.elsewhere then
        raise exception 'seat % is not of the section its hold holds', v.label
            using errcode = 'check_violation', constraint = 'seat_pin_section';
    end if;
    raise exception 'a pin is made live, on a live hold'
        using errcode = 'check_violation', constraint = 'seat_pin_live_hold';
end;
$function$;

-- hf_seat_plan (last written by 0180_seating.sql)
CREATE OR REPLACE FUNCTION public.hf_seat_plan(p_section text, p_rows jsonb)
 RETURNS TABLE(status text, added integer, placed integer, removed integer, refused text[], total integer)
 LANGUAGE plpgsql
 SET jit TO 'off'
AS $function$
declare
    v_section seat_sections;
    v_refused text[];
    v_added integer;
    v_placed integer;
    v_removed integer;
    v_blocked integer;
    v_total integer;
begin
    select * into v_section from seat_sections where product_id = p_section;
    if not found then
        perform hf_bad_input(format('%s is not a seated section', p_section));
    end if;
    if p_rows is null or jsonb_typeof(p_rows) <> 'array' or jsonb_array_length(p_rows) not between 1 and 999 then
        perform hf_bad_input('a plan is 1 to 999 rows');
    end if;
    -- each row's shape, read as JSON before anything is cast
    if exists (
        select 1 from jsonb_array_elements(p_rows) e
         where jsonb_typeof(e) <> 'object'
            or jsonb_typeof(e -> 'row') is distinct from 'string'
            or (e ->> 'row') !~ '^[A-Za-z0-9][A-Za-z0-9 ._-]{0,11}$'
            or jsonb_typeof(e -> 'rank') is distinct from 'number'
            or (e ->> 'rank') !~ '^0*[1-9][0-9]{0,2}$'
            or jsonb_typeof(e -> 'seats') is distinct from 'array'
            or jsonb_array_length(e -> 'seats') <> 2
            or exists (select 1 from jsonb_array_elements(e -> 'seats') n
                        where (n #>> '{}') !~ '^[0-9]{1,4}$')
            or exists (select 1 from jsonb_array_elements(coalesce(e -> 'aisles_after', '[]')
                                                          || coalesce(e -> 'wheelchair', '[]')
                                                          || coalesce(e -> 'companion', '[]')) n
                        where (n #>> '{}') !~ '^[0-9]{1,4}$')
            or case when (e #>> '{seats,0}') ~ '^[0-9]{1,4}$' and (e #>> '{seats,1}') ~ '^[0-9]{1,4}$'
                    then (e #>> '{seats,0}')::int > (e #>> '{seats,1}')::int
                         or (e #>> '{seats,1}')::int - (e #>> '{seats,0}')::int >= 1000
                    else true end)
       or (select count(distinct e ->> 'row') from jsonb_array_elements(p_rows) e) <> jsonb_array_length(p_rows)
       or (select count(distinct e ->> 'rank') from jsonb_array_elements(p_rows) e) <> jsonb_array_length(p_rows) then
        perform hf_bad_input('each row has a label (a letter or digit first, at most 12), a rank 1 to 999 '
                             'and its first and last seat numbers (at most 1,000 seats), each label and '
                             'rank once; aisles and accessible places are seat numbers');
    end if;
    if to_regclass('pg_temp.plan_seats') is not null then
        drop table pg_temp.plan_seats;
    end if;
    create temporary table plan_seats (
        label text primary key, row_label text, number integer, row_rank integer, run integer,
        pos integer, x integer, y integer, access text
    ) on commit drop;
    insert into plan_seats
    select r.row_label || '-' || n, r.row_label, n, r.row_rank,
           r.row_rank * 1000 + (select count(*) from unnest(r.aisles) a where a < n)::int,
           n,
           n * 10 + 20 * (select count(*) from unnest(r.aisles) a where a < n)::int
               - (10 * (r.first + r.last) + 20 * cardinality(r.aisles)) / 2,
           r.row_rank * 12,
           case when n = any (r.wheelchair) then 'wheelchair'
                when n = any (r.companion) then 'companion' else 'none' end
      from (select e ->> 'row' as row_label, (e ->> 'rank')::int as row_rank,
                   (e #>> '{seats,0}')::int as first, (e #>> '{seats,1}')::int as last,
                   array(select x::int from jsonb_array_elements_text(coalesce(e -> 'aisles_after', '[]')) x
                          where x::int >= (e #>> '{seats,0}')::int
                            and x::int < (e #>> '{seats,1}')::int) as aisles,
                   array(select jsonb_array_elements_text(coalesce(e -> 'wheelchair', '[]'))::int) as wheelchair,
                   array(select jsonb_array_elements_text(coalesce(e -> 'companion', '[]'))::int) as companion
              from jsonb_array_elements(p_rows) e) r,
           generate_series(r.first, r.last) n;

    -- lock: the section
    perform 1 from resources where id = v_section.resource_id for no key update;
    perform hf_release_aside(v_section.resource_id, clock_timestamp());
    perform hf_seat_expire_due(v_section.resource_id);
    select array_agg(s.label order by s.row_rank, s.run, s.pos) into v_refused
      from seats s
     where s.section = p_section and not exists (select 1 from plan_seats p where p.label = s.label)
       and exists (select 1 from seat_pins p where p.seat_id = s.id and p.live);
    if v_refused is not null then
        perform hf_hand_over(v_section.resource_id, clock_timestamp());
        return query select 'refused', 0, 0, 0, v_refused, null::integer;
        return;
    end if;

    -- gone from the plan: removed, or blocked when a pin or a code ever named it
    with gone as (
        select s.id from seats s
         where s.section = p_section and not exists (select 1 from plan_seats p where p.label = s.label)
    ), named as (
        select g.id from gone g
         where exists (select 1 from seat_pins p where p.seat_id = g.id)
            or exists (select 1 from order_items c where c.seat_id = g.id)
    ), blocked as (
        update seats s set state = 'blocked', note = 'off the plan', run = -s.id, pos = 0
          from named n where s.id = n.id and (s.state <> 'blocked' or s.note <> 'off the plan')
        returning 1
    )
    select count(*)::int into v_blocked from blocked;
    delete from seats s
     where s.section = p_section and not exists (select 1 from plan_seats p where p.label = s.label)
       and not exists (select 1 from seat_pins p where p.seat_id = s.id)
       and not exists (select 1 from order_items c where c.seat_id = s.id);
    get diagnostics v_removed = row_count;
    -- still in it: its new place (moved aside first, so no two share a
    -- place on the way)
    update seats s set run = -1000000 - s.id
      from plan_seats p
     where s.section = p_section and s.label = p.label
       and (s.run, s.pos) is distinct from (p.run, p.pos);
    update seats s
       set row_label = p.row_label, number = p.number, row_rank = p.row_rank, run = p.run,
           pos = p.pos, x = p.x, y = p.y, access = p.access,
           -- back in the plan: on sale again
           state = case when s.note = 'off the plan' then 'open' else s.state end,
           note = case when s.note = 'off the plan' then '' else s.note end
      from plan_seats p
     where s.section = p_section and s.label = p.label
       and ((s.row_label, s.number, s.row_rank, s.run, s.pos, s.x, s.y, s.access)
            is distinct from (p.row_label, p.number, p.row_rank, p.run, p.pos, p.x, p.y, p.access)
            or s.note = 'off the plan');
    get diagnostics v_placed = row_count;
    insert into seats (section, label, row_label, number, row_rank, run, pos, x, y, access)
    select p_section, p.label, p.row_label, p.number, p.row_rank, p.run, p.pos, p.x, p.y, p.access
      from plan_seats p
     where not exists (select 1 from seats s where s.section = p_section and s.label = p.label);
    get diagnostics v_added = row_count;

    select count(*)::int into v_total from seats s where s.section = p_section and s.state = 'open';
    perform 1 from hf_upsert_resource(v_section.resource_id, v_total);
    perform hf_hand_over(v_section.resource_id, clock_timestamp());
    return query select 'changed', v_added, v_placed, v_removed + v_blocked, null::text[], v_total;
end;
$function$;

-- hf_seat_return (last written by 0200_items.sql)
CREATE OR REPLACE FUNCTION public.hf_seat_return(p_purchase uuid, p_items bigint[], p_restock boolean)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
declare
    v_seats bigint[];
begin
    with ended as (
        update seat_pins p
           set live = false, ended_at = clock_timestamp(), end_reason = 'returned'
          from order_items c, holds h
         where c.id = any (p_items) and c.seat_id = p.seat_id
           and p.hold_id = h.id and h.purchase_id = p_purchase and p.live
        returning p.seat_id
    )
    select array_agg(seat_id) into v_seats from ended;
    if v_seats is not null and not p_restock then
        update seats set state = 'blocked', note = 'taken off sale with a refund'
         where id = any (v_seats);
    end if;
    return coalesce(cardinality(v_seats), 0);
end;
$function$;

-- hf_seat_section (last written by 0180_seating.sql)
CREATE OR REPLACE FUNCTION public.hf_seat_section(p_resource text)
 RETURNS seat_sections
 LANGUAGE sql
 STABLE
AS $function$
    select * from seat_sections where resource_id = p_resource
$function$;

-- hf_seat_set_state (last written by 0185_seat_admin.sql)
CREATE OR REPLACE FUNCTION public.hf_seat_set_state(p_section text, p_labels text[], p_state text, p_note text, p_from text[] DEFAULT NULL::text[])
 RETURNS TABLE(status text, changed integer, refused text[], total integer)
 LANGUAGE plpgsql
AS $function$
declare
    v_section seat_sections;
    v_refused text[];
    v_unknown text[];
    v_wrong text[];
    v_changed integer;
    v_total integer;
    v_now timestamptz := clock_timestamp();
begin
    select * into v_section from seat_sections where product_id = p_section;
    if not found then
        perform hf_bad_input(format('%s is not a seated section', p_section));
    end if;
    if p_state is null or p_state not in ('open', 'blocked', 'held_back') then
        perform hf_bad_input('a seat is open, blocked or held_back');
    end if;
    if p_labels is null or cardinality(p_labels) not between 1 and 10000 then
        perform hf_bad_input('name 1 to 10,000 seats');
    end if;
    if p_note is null or length(p_note) > 200 then
        perform hf_bad_input('a note is at most 200 characters');
    end if;
    if p_state <> 'open' and p_note = 'off the plan' then
        perform hf_bad_input('"off the plan" is the plan''s own note: give another');
    end if;
    if p_from is not null and not p_from <@ array['open', 'blocked', 'held_back'] then
        perform hf_bad_input('a seat is open, blocked or held_back');
    end if;
    -- lock: the section
    perform 1 from resources where id = v_section.resource_id for no key update;
    select array_agg(l order by l) into v_unknown
      from unnest(p_labels) l
     where not exists (select 1 from seats s where s.section = p_section and s.label = l
                                              and s.note <> 'off the plan');
    if v_unknown is not null then
        return query select 'unknown', 0, v_unknown, null::integer;
        return;
    end if;
    -- a seat in a state the action does not change from (unblocking a
    -- seat held back): refused, named, nothing changed
    if p_from is not null then
        select array_agg(s.label order by s.row_rank, s.run, s.pos) into v_wrong
          from seats s
         where s.section = p_section and s.label = any (p_labels)
           and s.state <> p_state and s.state <> all (p_from);
        if v_wrong is not null then
            return query select 'wrong_state', 0, v_wrong, null::integer;
            return;
        end if;
    end if;
    if p_state <> 'open' then
        -- what is set aside for the line is given back first: only a
        -- shopper's seat is refused
        perform hf_release_aside(v_section.resource_id, v_now);
        perform hf_seat_expire_due(v_section.resource_id);
        select array_agg(s.label order by s.row_rank, s.run, s.pos) into v_refused
          from seats s
         where s.section = p_section and s.label = any (p_labels) and s.state <> p_state
           and exists (select 1 from seat_pins p where p.seat_id = s.id and p.live);
        if v_refused is not null then
            perform hf_hand_over(v_section.resource_id, v_now);
            return query select 'refused', 0, v_refused, null::integer;
            return;
        end if;
    end if;
    update seats s set state = p_state, note = case when p_state = 'open' then '' else p_note end
     where s.section = p_section and s.label = any (p_labels)
       and (s.state <> p_state
            or s.note <> case when p_state = 'open' then '' else p_note end);
    get diagnostics v_changed = row_count;
    select count(*)::int into v_total from seats s where s.section = p_section and s.state = 'open';
    perform 1 from hf_upsert_resource(v_section.resource_id, v_total);
    perform hf_hand_over(v_section.resource_id, v_now);
    return query select 'changed', v_changed, null::text[], v_total;
end;
$function$;

-- hf_seat_stretches (last written by 0180_seating.sql)
CREATE OR REPLACE FUNCTION public.hf_seat_stretches(p_section text, p_qty integer, p_exclude bigint[], p_near point, p_limit integer, p_from integer DEFAULT 1, p_to integer DEFAULT 999)
 RETURNS TABLE(seat_ids bigint[], orphans integer)
 LANGUAGE sql
 STABLE
AS $function$
    with free as (
        select s.id, s.row_rank, s.run, s.pos, s.x, s.y,
               s.pos - row_number() over (partition by s.run order by s.pos) as grp
          from seats s
         where s.section = p_section and s.row_rank between p_from and p_to
           and s.state = 'open' and s.access = 'none'
           -- a set, hashed: a combined start excludes up to every seat
           and s.id not in (select unnest(coalesce(p_exclude, '{}')))
           and not exists (select 1 from seat_pins p where p.seat_id = s.id and p.live)
    ), middle as (
        select (min(x) + max(x)) / 2.0::float8 as x from seats where section = p_section
    ), start as (
        -- every free seat as the first of a way: the seat p_qty - 1 further
        -- along its stretch is the last (none: no way starts here), and the
        -- stretch's ends; one sort, no join of the seats with themselves
        select f.run, f.row_rank, f.pos as first,
               lead(f.pos, p_qty - 1) over along as last,
               (f.x + lead(f.x, p_qty - 1) over along) / 2.0::float8 as mid_x,
               (f.y + lead(f.y, p_qty - 1) over along) / 2.0::float8 as mid_y,
               min(f.pos) over whole as lo, max(f.pos) over whole as hi
          from free f
        window along as (partition by f.run, f.grp order by f.pos),
               whole as (partition by f.run, f.grp)
    ), way as (
        select w.run, w.first, w.last, w.row_rank,
               ((w.first - w.lo = 1)::int + (w.hi - w.last = 1)::int) as orphans,
               abs(w.mid_x - (select x from middle)) as off_middle,
               case when p_near is null then 0 else point(w.mid_x, w.mid_y) <-> p_near end as off_near
          from start w
         where w.last is not null
    ), best as (
        select * from way
         order by off_near, orphans, row_rank, off_middle, run, first
         limit p_limit
    )
    select (select array_agg(f.id order by f.pos) from free f
             where f.run = b.run and f.pos between b.first and b.last),
           b.orphans
      from best b
     order by b.off_near, b.orphans, b.row_rank, b.off_middle, b.run, b.first
$function$;

-- hf_seat_words (last written by 0180_seating.sql)
CREATE OR REPLACE FUNCTION public.hf_seat_words(p_ids bigint[])
 RETURNS text
 LANGUAGE sql
 STABLE
AS $function$
    select string_agg(s.label, ', ' order by s.row_rank, s.run, s.pos)
      from seats s where s.id = any (p_ids)
$function$;

-- hf_seats_free (last written by 0230_seats_chosen_together.sql)
CREATE OR REPLACE FUNCTION public.hf_seats_free(p_limit_keys text[], p_resources text[])
 RETURNS TABLE(resource_id text, splits boolean, first_fit boolean, middle double precision, id bigint, label text, row_rank integer, run integer, pos integer, x integer)
 LANGUAGE plpgsql
AS $function$
begin
    if coalesce(cardinality(p_resources), 0) not between 1 and 10000 then
        perform hf_bad_input('read the free seats of 1 to 10000 resources');
    end if;
    perform hf_limit_lock(k.k)
       from (select distinct k from unnest(p_limit_keys) k where k is not null order by k) k;
    perform 1 from resources r where r.id = any (p_resources) order by r.id for no key update;
    -- a section's expired holds end, so their seats are free to choose
    perform hf_seat_expire_due(x.resource_id)
       from seat_sections x where x.resource_id = any (p_resources) order by x.resource_id;
    return query
        with section as materialized (
            -- the middle of each section's width, once a section
            select x.product_id, x.resource_id, x.chooser = 'first_fit' as first_fit,
                   (select (min(a.x) + max(a.x)) / 2.0::float8
                      from seats a where a.section = x.product_id) as middle
              from seat_sections x
             where x.resource_id = any (p_resources))
        select x.resource_id, coalesce((select t.splits from seating_settings t), false),
               x.first_fit, x.middle, s.id, s.label, s.row_rank, s.run, s.pos, s.x
          from section x
          join seats s on s.section = x.product_id
         where s.state = 'open' and s.access = 'none'
           and not exists (select 1 from seat_pins p where p.seat_id = s.id and p.live)
         order by x.resource_id, s.row_rank, s.run, s.pos;
end;
$function$;

-- hf_settle_deadline (last written by 0090_settling.sql)
CREATE OR REPLACE FUNCTION public.hf_settle_deadline(p_from timestamp with time zone, p_days integer, p_business boolean)
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
declare
    v_at timestamptz := p_from;
    v_left integer := p_days;
begin
    if not p_business then
        return p_from + p_days * interval '24 hours';
    end if;
    while v_left > 0 loop
        v_at := v_at + interval '24 hours';
        if extract(isodow from v_at at time zone 'UTC') < 6 then
            v_left := v_left - 1;
        end if;
    end loop;
    return v_at;
end;
$function$;

-- hf_settle_ended (last written by 0002_inventory_functions.sql)
CREATE OR REPLACE FUNCTION public.hf_settle_ended(p_purchase uuid, p_shape purchase_shape, p_now timestamp with time zone)
 RETURNS text
 LANGUAGE plpgsql
AS $function$
begin
    if p_shape.released > 0 then
        perform hf_end_purchase(p_purchase, 'released', p_now, 'basket', 'basket_line_released');
        return 'released';
    end if;
    if p_shape.expired > 0 then
        perform hf_end_purchase(p_purchase, 'expired', p_now, 'basket', 'basket_line_expired');
        return 'expired';
    end if;
    if p_shape.plain_due > 0 then
        -- past its TTL and not paying: it counts as free, so it is expired now
        -- rather than revived
        perform hf_end_purchase(p_purchase, 'expired', p_now, 'lazy-expiry', 'ttl');
        return 'expired';
    end if;
    if p_shape.paying_due > 0 then
        -- Past its payment deadline. Only this purchase's own paths get here
        -- (confirm, begin_payment, release, extend), never another shopper's
        -- hold; the answer no longer depends on whether the sweeper ran.
        perform hf_end_purchase(p_purchase, 'expired', p_now, 'deadline', 'payment_deadline');
        return 'expired';
    end if;
    return null;
end;
$function$;

-- hf_settle_window (last written by 0090_settling.sql)
CREATE OR REPLACE FUNCTION public.hf_settle_window(p_provider text, p_method text)
 RETURNS settle_windows
 LANGUAGE sql
 STABLE
AS $function$
    select * from settle_windows
     where provider = p_provider and method in (coalesce(p_method, '*'), '*')
     order by (method = '*')
     limit 1;
$function$;

-- hf_settle_windows_exceed_payment_window (last written by 0090_settling.sql)
CREATE OR REPLACE FUNCTION public.hf_settle_windows_exceed_payment_window()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
declare
    v_window interval;
    v_short settle_windows;
begin
    select payment_window into v_window from inventory_settings;
    select * into v_short from settle_windows w
     where make_interval(days => w.days) <= v_window
     order by w.days, w.provider, w.method
     limit 1;
    if found then
        raise exception 'a settling window (% %: % days) must be longer than the payment window (%)',
                        v_short.provider, v_short.method, v_short.days, v_window
            using errcode = 'check_violation', constraint = 'settle_window_exceeds_payment_window';
    end if;
    return null;
end;
$function$;

-- hf_short_lines (last written by 0210_one_checkout_path.sql)
CREATE OR REPLACE FUNCTION public.hf_short_lines(p_products text[], p_requested integer[], p_left integer[])
 RETURNS jsonb
 LANGUAGE sql
 IMMUTABLE
AS $function$
    select coalesce(jsonb_agg(jsonb_build_object('product', x.product, 'requested', x.requested,
                                                 'available', greatest(x.left_, 0))
                              order by x.n), '[]'::jsonb)
      from unnest(p_products, p_requested, p_left) with ordinality as x(product, requested, left_, n);
$function$;

-- hf_start_checkouts (last written by 0230_seats_chosen_together.sql)
CREATE OR REPLACE FUNCTION public.hf_start_checkouts(p_checkouts jsonb)
 RETURNS TABLE(status text, order_id uuid, hold_id uuid, number text, created_at timestamp with time zone, detail jsonb)
 LANGUAGE plpgsql
AS $function$
declare
    s inventory_settings;
    v_n integer;
    v_now timestamptz;
    -- the checkouts, by position
    c_key text[]; c_account text[]; c_token text[]; c_name text[]; c_email text[];
    c_phone text[]; c_currency text[]; c_provider text[]; c_email_key text[];
    c_address text[]; c_address_cap integer[]; c_voucher text[];
    c_first integer[];      -- where its key is first in the batch
    c_amount bigint[]; c_discount bigint[];
    c_pins boolean[];       -- it has seat or table lines
    c_existing uuid[];      -- the order its key has already
    c_named boolean[];      -- its seats name a line
    -- where each checkout's lines and holds lie in the arrays below
    c_l1 integer[]; c_l2 integer[]; c_h1 integer[]; c_h2 integer[];
    -- the lines, by checkout and then as given
    l_ck integer[]; l_product text[]; l_name text[]; l_qty integer[]; l_price bigint[];
    l_paid bigint[]; l_resource text[]; l_email_cap integer[]; l_claim text[];
    l_seats text[]; l_together boolean[];
    l_chosen text[];        -- its seats' ids, when the batch chose them (hf_seats_free)
    l_apart text[];         -- or the split the batch offers instead
    -- sections whose lines the batch chose for can no longer be trusted
    v_diverged text[] := '{}';
    l_h integer[];          -- the hold of its resource, in h_
    l_egroup integer[];     -- its (e-mail, product) when the e-mail is capped
    l_email_used integer[]; -- what that e-mail holds of it in pending orders
    l_named text[];         -- its name once its seats are chosen
    -- a party's table: the room, the stay, the tables, the booking's terms
    l_room text[]; l_during tstzrange[]; l_tables jsonb[]; l_deposit bigint[];
    l_cancel timestamptz[];
    -- the holds each checkout asks for: its lines' units and the
    -- voucher's uses of one resource, summed
    h_ck integer[]; h_resource text[]; h_qty integer[]; h_units integer[];
    h_use text[];           -- a voucher's use: the refusal when it is short
    h_r integer[];          -- its resource, in r_
    h_agroup integer[];     -- its (address, resource) when the address is capped
    h_address_used integer[];
    h_id uuid[];
    -- the resources of the batch, ascending, and what they have left
    r_id text[]; r_left integer[]; r_granted integer[]; r_next timestamptz[];
    r_swept boolean[];
    -- what the batch granted so far, per capped group
    v_egranted integer[]; v_agranted integer[];
    -- seats and tables the batch's started checkouts chose
    sp_l integer[] := '{}'; sp_seat bigint[] := '{}';
    tp_room text[] := '{}'; tp_table text[] := '{}'; tp_during tstzrange[] := '{}';
    v_one_section boolean;
    v_capped boolean;
    -- checkouts refused before they are looked at: their key holds units
    -- outside any order, a resource is unknown, a sale is not open
    v_key_used integer[]; v_unknown_ck integer[]; v_off_ck integer[];
    v_off_sale text[];
    -- the answers
    v_status text[]; v_order uuid[]; v_purchase uuid[]; v_basket uuid[]; v_detail jsonb[];
    -- one checkout's: its seats (kept when it starts), what refuses it
    v_seats_l integer[]; v_seats_id bigint[];
    v_short text[]; v_want integer[]; v_left integer[]; v_refusal text;
    v_found uuid;
    v_room integer; v_address_room integer; v_mine integer; v_count integer; v_mark integer;
    v_written integer; v_started integer;
    v_exclude bigint[];
    v_chosen bigint[];
    v_labels text[];
    v_terms record;
    v_tables text[];
    v_during tstzrange;
    v_r integer;
    v_choice record;
    v_row record;
begin
    v_n := coalesce(jsonb_array_length(p_checkouts), 0);
    if v_n not between 1 and 1000 then
        perform hf_bad_input(format('a batch starts 1 to 1000 checkouts, got %s', v_n));
    end if;
    select * into s from inventory_settings;

    -- The checkouts, their lines and their holds, read once; a key seen
    -- earlier in the batch is its first's.
    select array_agg(x.key order by x.n), array_agg(x.doc->>'account' order by x.n),
           array_agg(x.doc->>'token' order by x.n), array_agg(x.doc->>'name' order by x.n),
           array_agg(x.doc->>'email' order by x.n), array_agg(x.doc->>'phone' order by x.n),
           array_agg(x.doc->>'currency' order by x.n), array_agg(x.doc->>'provider' order by x.n),
           array_agg(x.doc->>'email_key' order by x.n), array_agg(x.doc->>'address' order by x.n),
           array_agg((x.doc->>'address_cap')::integer order by x.n),
           array_agg(x.doc->>'voucher' order by x.n), array_agg(x.first order by x.n)
      into c_key, c_account, c_token, c_name, c_email, c_phone, c_currency, c_provider,
           c_email_key, c_address, c_address_cap, c_voucher, c_first
      from (select e.doc, e.n, e.doc->>'key' as key,
                   (min(e.n) over (partition by e.doc->>'key'))::integer as first
              from jsonb_array_elements(p_checkouts) with ordinality as e(doc, n)) x;
    if exists (select 1 from unnest(c_key, c_account, c_token, c_name, c_email, c_currency,
                                    c_provider) as c(key, account, token, name, email, currency,
                                                     provider)
                where c.key is null or length(c.key) not between 1 and 255
                   or c.account is null or length(c.account) not between 1 and 200
                   or c.token is null or c.name is null or c.email is null
                   or c.currency is null or c.provider is null)
       or exists (select 1 from jsonb_array_elements(p_checkouts) c
                   where coalesce(jsonb_typeof(c->'lines'), '') <> 'array'
                      or jsonb_array_length(c->'lines') not between 1 and 100) then
        perform hf_bad_input('every checkout needs its key (1 to 255 characters), its account '
                             '(1 to 200), its token, customer, currency, provider and 1 to 100 lines');
    end if;
    select array_agg(x.ck order by x.ck, x.k), array_agg(x.line->>'product' order by x.ck, x.k),
           array_agg(x.line->>'name' order by x.ck, x.k),
           array_agg((x.line->>'qty')::integer order by x.ck, x.k),
           array_agg((x.line->>'unit_price')::bigint order by x.ck, x.k),
           array_agg(coalesce((x.line->>'paid')::bigint,
                              (x.line->>'unit_price')::bigint * (x.line->>'qty')::integer)
                     order by x.ck, x.k),
           array_agg(x.line->>'resource' order by x.ck, x.k),
           array_agg((x.line->>'email_cap')::integer order by x.ck, x.k),
           array_agg(coalesce(x.line->>'claim', 'units') order by x.ck, x.k),
           array_agg(case jsonb_typeof(x.line->'seats') when 'array' then (x.line->'seats')::text end
                     order by x.ck, x.k),
           array_agg(coalesce((x.line->>'together')::boolean, true) order by x.ck, x.k),
           array_agg(case jsonb_typeof(x.line->'chosen') when 'array' then (x.line->'chosen')::text end
                     order by x.ck, x.k),
           array_agg(case jsonb_typeof(x.line->'apart') when 'object' then (x.line->'apart')::text end
                     order by x.ck, x.k)
      into l_ck, l_product, l_name, l_qty, l_price, l_paid, l_resource, l_email_cap, l_claim,
           l_seats, l_together, l_chosen, l_apart
      from (select c.n::integer as ck, l.line, l.k
              from jsonb_array_elements(p_checkouts) with ordinality as c(doc, n),
                   jsonb_array_elements(c.doc->'lines') with ordinality as l(line, k)) x;
    if exists (select 1 from unnest(l_product, l_name, l_resource, l_qty, l_price, l_paid, l_claim)
                               as l(product, name, resource, qty, price, paid, claim)
                where l.product is null or l.name is null or l.resource is null
                   or l.qty is null or l.qty <= 0 or l.price is null or l.price < 0
                   or l.paid < 0 or l.claim not in ('units', 'seats', 'table'))
       or exists (select 1 from unnest(l_ck, l_product) as x(ck, product)
                   group by x.ck, x.product having count(*) > 1) then
        perform hf_bad_input('every line needs a product, a name, a resource, a positive qty, '
                             'a price and a claim (units, seats or table), each product once');
    end if;
    -- per checkout: its lines, its amount and discount, whether it pins
    select array_agg(x.l1 order by x.ck), array_agg(x.l2 order by x.ck),
           array_agg(x.amount order by x.ck), array_agg(x.discount order by x.ck),
           array_agg(x.pins order by x.ck)
      into c_l1, c_l2, c_amount, c_discount, c_pins
      from (select l.ck, min(l.k)::integer as l1, max(l.k)::integer as l2,
                   sum(l.paid) as amount, sum(l.price * l.qty - l.paid) as discount,
                   bool_or(l.claim <> 'units') as pins
              from unnest(l_ck, l_qty, l_price, l_paid, l_claim) with ordinality
                   as l(ck, qty, price, paid, claim, k)
             group by l.ck) x;
    -- its holds: the lines' units and the voucher's uses, per resource
    select array_agg(h.ck order by h.ck, h.resource), array_agg(h.resource order by h.ck, h.resource),
           array_agg(h.qty order by h.ck, h.resource),
           array_agg(coalesce(h.units, 0) order by h.ck, h.resource),
           array_agg(h.use_ order by h.ck, h.resource)
      into h_ck, h_resource, h_qty, h_units, h_use
      from (select u.ck, u.resource, sum(u.qty)::integer as qty,
                   (sum(u.qty) filter (where u.use_ is null))::integer as units,
                   max(u.use_) as use_
              from (select l.ck, l.resource, l.qty, null::text as use_
                      from unnest(l_ck, l_resource, l_qty) as l(ck, resource, qty)
                    union all
                    select c.n::integer, u.use->>'resource', 1, coalesce(u.use->>'refusal', 'used_up')
                      from jsonb_array_elements(p_checkouts) with ordinality as c(doc, n),
                           jsonb_array_elements(c.doc->'uses') as u(use)) u
             group by u.ck, u.resource) h;
    if exists (select 1 from unnest(h_resource) as x(id) where x.id is null) then
        perform hf_bad_input('a voucher''s use needs its resource');
    end if;
    select array_agg(x.h1 order by x.ck), array_agg(x.h2 order by x.ck)
      into c_h1, c_h2
      from (select h.ck, min(h.n)::integer as h1, max(h.n)::integer as h2
              from unnest(h_ck) with ordinality as h(ck, n) group by h.ck) x;
    select array_agg(h.n::integer order by l.k)
      into l_h
      from unnest(l_ck, l_resource) with ordinality as l(ck, resource, k)
      join unnest(h_ck, h_resource) with ordinality as h(ck, resource, n)
        on h.ck = l.ck and h.resource = l.resource;
    select array_agg(distinct x.id order by x.id) into r_id from unnest(h_resource) as x(id);
    select array_agg(r.n::integer order by h.n)
      into h_r
      from unnest(h_resource) with ordinality as h(resource, n)
      join unnest(r_id) with ordinality as r(id, n) on r.id = h.resource;
    v_one_section := (select count(distinct l.resource) from unnest(l_resource, l_claim) l(resource, claim)
                       where l.claim = 'seats') <= 1;
    v_capped := exists (select 1 from unnest(l_ck, l_email_cap) as l(ck, cap)
                         where l.cap is not null and c_email_key[l.ck] is not null)
                or exists (select 1 from unnest(c_address_cap, c_address) as a(cap, address)
                            where a.cap is not null and a.address is not null);

    -- Lock: every e-mail and address of the batch, in one order, before
    -- any order row and before any resource.
    perform hf_limit_lock(k.k)
       from (select distinct k from unnest(c_email_key || c_address) k
              where k is not null order by k) k;
    -- Lock: every resource of the batch, ascending id.
    perform 1 from resources x where x.id = any (r_id) order by x.id for no key update;
    -- Lock: with a cap across resources, every account of the batch, in
    -- the order of their lock keys (as hf_hold_many takes them).
    if s.account_cap is not null and s.cap_scope = 'global' then
        perform pg_advisory_xact_lock(k)
           from (select distinct hashtextextended('holdfast.account:' || a, 0) as k
                   from unnest(c_account) a order by 1) keys;
    end if;
    -- Lock: every room a party of the batch is seated in, ascending id.
    if 'table' = any (l_claim) then
        perform 1 from dining_rooms d
         where d.collection in (select t.room from dining_times t
                                 join unnest(l_product, l_claim) as l(product, claim)
                                   on l.product = t.product_id and l.claim = 'table')
         order by d.collection for no key update;
    end if;
    v_now := clock_timestamp();
    -- a section's expired holds end, so their seats are free to choose
    if 'seats' = any (l_claim) then
        perform hf_seat_expire_due(x.r)
           from (select distinct l.resource as r from unnest(l_resource, l_claim) as l(resource, claim)
                  where l.claim = 'seats' order by 1) as x(r);
    end if;

    -- What the locks let this call see, read once for the batch: each
    -- resource's counters, the order each key has, the keys holding units
    -- outside any order, the products whose sale is not open by this
    -- database's clock (the same for every process).
    select array_agg(x.total - x.held - x.sold order by r.n), array_agg(x.next_expiry order by r.n)
      into r_left, r_next
      from unnest(r_id) with ordinality as r(id, n) left join resources x on x.id = r.id;
    r_granted := array_fill(0, array[cardinality(r_id)]);
    r_swept := array_fill(false, array[cardinality(r_id)]);
    select array_agg(o.id order by c.n)
      into c_existing
      from unnest(c_key) with ordinality as c(key, n) left join orders o on o.checkout_key = c.key;
    select coalesce(array_agg(distinct h.ck), '{}')
      into v_key_used
      from unnest(h_ck, h_resource) as h(ck, resource)
      join holds x on x.resource_id = h.resource and x.account_id = c_account[h.ck]
                  and x.idempotency_key = c_key[h.ck];
    select coalesce(array_agg(distinct h.ck), '{}')
      into v_unknown_ck
      from unnest(h_ck, h_r) as h(ck, r) where r_left[h.r] is null;
    select coalesce(array_agg(distinct p.id), '{}'), coalesce(array_agg(distinct l.ck), '{}')
      into v_off_sale, v_off_ck
      from unnest(l_ck, l_product) as l(ck, product)
      join products p on p.id = l.product
     where (p.sale_opens_at is not null and p.sale_opens_at > now())
        or (p.sale_closes_at is not null and p.sale_closes_at <= now());

    -- What each capped e-mail holds of a product, and each capped address
    -- of a resource, in pending orders: one statement each for the whole
    -- batch (a call per checkout was most of a batch's time), with the
    -- group its checkouts' grants are counted in.
    if v_capped then
        select array_agg(coalesce(u.used, 0) order by x.k), array_agg(x.g order by x.k)
          into l_email_used, l_egroup
          from (select l.k, c_email_key[l.ck] as email_key, l.product,
                       case when l.cap is not null and c_email_key[l.ck] is not null
                            then dense_rank() over (order by c_email_key[l.ck], l.product)
                       end as g
                  from unnest(l_ck, l_product, l_email_cap) with ordinality
                       as l(ck, product, cap, k)) x
          left join lateral (
               select sum(l.qty)::integer as used
                 from orders o join order_lines l on l.order_id = o.id
                where x.g is not null and o.email_key = x.email_key
                  and o.state in ('pending', 'settling') and l.product_id = x.product
                  and hf_purchase_live(o.hold_id)) u on true;
        select array_agg(coalesce(u.used, 0) order by x.n), array_agg(x.g order by x.n)
          into h_address_used, h_agroup
          from (select h.n, c_address[h.ck] as address, h.resource,
                       case when c_address_cap[h.ck] is not null
                                 and c_address[h.ck] is not null and h.use_ is null
                            then dense_rank() over (order by c_address[h.ck], h.resource)
                       end as g
                  from unnest(h_ck, h_resource, h_use) with ordinality as h(ck, resource, use_, n)) x
          left join lateral (
               select sum(l.qty)::integer as used
                 from orders o join order_lines l on l.order_id = o.id
                 join products p on p.id = l.product_id
                where x.g is not null and o.client_address = x.address
                  and o.state in ('pending', 'settling') and p.resource_id = x.resource
                  and hf_purchase_live(o.hold_id)) u on true;
        v_egranted := array_fill(0, array[cardinality(l_ck)]);
        v_agranted := array_fill(0, array[cardinality(h_ck)]);
    end if;

    v_status := array_fill(null::text, array[v_n]);
    v_order := array_fill(null::uuid, array[v_n]);
    v_basket := array_fill(null::uuid, array[v_n]);
    v_detail := array_fill(null::jsonb, array[v_n]);
    c_named := array_fill(false, array[v_n]);
    l_named := l_name;
    if true = any (c_pins) then
        l_room := array_fill(null::text, array[cardinality(l_ck)]);
        l_during := array_fill(null::tstzrange, array[cardinality(l_ck)]);
        l_tables := array_fill(null::jsonb, array[cardinality(l_ck)]);
        l_deposit := array_fill(null::bigint, array[cardinality(l_ck)]);
        l_cancel := array_fill(null::timestamptz, array[cardinality(l_ck)]);
    end if;

    -- Each checkout in arrival order, against what the ones before it in
    -- the batch were granted: all of it, or nothing.
    <<checkouts>>
    for i in 1 .. v_n loop
        -- The batch chose its best seats before this call, in this order,
        -- as if every checkout before this one started with the seats it
        -- chose and no other seat was taken. When the one before did not
        -- start (the seats chosen for it stay free) or started with seats
        -- chosen here (named ones), its sections' later lines are chosen
        -- here (hf_seat_choose), as the seats really stand.
        if i > 1 then
            v_diverged := v_diverged || array(
                select l_resource[k] from generate_series(c_l1[i - 1], c_l2[i - 1]) k
                 where l_claim[k] = 'seats'
                   and case when v_status[i - 1] = 'started' then l_chosen[k] is null
                            else l_chosen[k] is not null end);
        end if;
        -- a form repeated in this batch is its first's, answered at the end
        continue when c_first[i] <> i;
        if c_existing[i] is not null then
            v_status[i] := 'already_started';
            v_order[i] := c_existing[i];
            continue;
        end if;
        -- a hold outside any order has the form's key: not this checkout's
        if i = any (v_key_used) then
            v_status[i] := 'key_in_use';
            continue;
        end if;
        if i = any (v_unknown_ck) then
            v_status[i] := 'unknown_products';
            v_detail[i] := jsonb_build_object('products', to_jsonb(array(
                select l_product[k] from generate_series(c_l1[i], c_l2[i]) k
                 where r_left[h_r[l_h[k]]] is null order by k)));
            continue;
        end if;
        if i = any (v_off_ck) then
            v_status[i] := 'not_on_sale';
            v_detail[i] := jsonb_build_object('lines', (
                select jsonb_agg(jsonb_build_object('product', p.id, 'opens_at', p.sale_opens_at,
                                                    'closes_at', p.sale_closes_at) order by p.id)
                  from products p
                 where p.id = any (l_product[c_l1[i] : c_l2[i]]) and p.id = any (v_off_sale)));
            continue;
        end if;

        v_short := '{}';
        v_want := '{}';
        v_left := '{}';
        -- the fair-sale limits: what the e-mail holds of each product and
        -- the address of each resource, with the batch's grants before it
        if v_capped then
            for k in c_l1[i] .. c_l2[i] loop
                v_room := null;
                if l_egroup[k] is not null then
                    v_room := l_email_cap[k] - l_email_used[k] - v_egranted[l_egroup[k]];
                end if;
                if h_agroup[l_h[k]] is not null then
                    -- the checkout's own lines on the resource count together
                    v_address_room := c_address_cap[i] - h_address_used[l_h[k]]
                                      - v_agranted[h_agroup[l_h[k]]] - (h_units[l_h[k]] - l_qty[k]);
                    v_room := least(coalesce(v_room, v_address_room), v_address_room);
                end if;
                if l_qty[k] > v_room then
                    v_short := v_short || l_product[k];
                    v_want := v_want || l_qty[k];
                    v_left := v_left || v_room;
                end if;
            end loop;
        end if;
        -- the engine's cap per account (inventory_settings), with the
        -- batch's grants to the same account
        if cardinality(v_short) = 0 and s.account_cap is not null then
            for h in c_h1[i] .. c_h2[i] loop
                select coalesce(sum(x.qty), 0) into v_mine from holds x
                 where x.account_id = c_account[i]
                   and (s.cap_scope = 'global' or x.resource_id = h_resource[h])
                   and (x.state = 'awaiting_payment' or (x.state = 'held' and x.expires_at > v_now));
                select v_mine + coalesce(sum(g.qty), 0) into v_mine
                  from unnest(h_ck, h_resource, h_qty) as g(ck, resource, qty)
                 where v_status[g.ck] = 'started' and c_account[g.ck] = c_account[i]
                   and (s.cap_scope = 'global' or g.resource = h_resource[h]);
                select case when s.cap_scope = 'global' then sum(h_qty[g]) else h_qty[h] end
                  into v_count
                  from generate_series(c_h1[i], c_h2[i]) g;
                if v_mine + v_count > s.account_cap then
                    select array_agg(l_product[k] order by k), array_agg(l_qty[k] order by k),
                           array_agg(s.account_cap - v_mine)
                      into v_short, v_want, v_left
                      from generate_series(c_l1[i], c_l2[i]) k
                     where s.cap_scope = 'global' or l_resource[k] = h_resource[h];
                    -- a voucher's use carries no line: every line goes
                    -- with it (an empty list would read as no refusal)
                    if v_short is null then
                        select array_agg(l_product[k] order by k), array_agg(l_qty[k] order by k),
                               array_agg(s.account_cap - v_mine)
                          into v_short, v_want, v_left
                          from generate_series(c_l1[i], c_l2[i]) k;
                    end if;
                    exit;
                end if;
            end loop;
        end if;
        if cardinality(v_short) > 0 then
            v_status[i] := 'over_limit';
            v_detail[i] := jsonb_build_object('lines', hf_short_lines(v_short, v_want, v_left));
            continue;
        end if;

        -- the units: what each resource has left after the batch's grants
        -- (expired holds count as free: looked for once, when needed and
        -- due)
        v_refusal := null;
        for h in c_h1[i] .. c_h2[i] loop
            v_r := h_r[h];
            if r_left[v_r] < h_qty[h] and not r_swept[v_r] and r_next[v_r] <= v_now then
                perform hf_expire_due_plain(r_id[v_r], v_now, 'lazy-expiry', null);
                r_swept[v_r] := true;
                select x.total - x.held - x.sold into v_room from resources x where x.id = r_id[v_r];
                r_left[v_r] := v_room - r_granted[v_r];
            end if;
            continue when r_left[v_r] >= h_qty[h];
            if h_use[h] is not null then
                -- the buyer's own use says more than the voucher's last
                v_refusal := case when v_refusal = 'used_by_you' then v_refusal else h_use[h] end;
            else
                for k in c_l1[i] .. c_l2[i] loop
                    if l_h[k] = h then
                        v_short := v_short || l_product[k];
                        v_want := v_want || l_qty[k];
                        v_left := v_left || r_left[v_r];
                    end if;
                end loop;
            end if;
        end loop;
        if v_refusal is not null then
            v_status[i] := 'bad_voucher';
            v_detail[i] := jsonb_build_object('refusal', v_refusal);
            continue;
        elsif cardinality(v_short) > 0 then
            v_status[i] := 'sold_out';
            v_detail[i] := jsonb_build_object('lines', hf_short_lines(v_short, v_want, v_left));
            continue;
        end if;

        v_seats_l := '{}';
        v_seats_id := '{}';
        v_mark := cardinality(tp_room);
        for k in c_l1[i] .. c_l2[i] loop
            exit when not c_pins[i];
            if l_claim[k] = 'seats' and l_chosen[k] is not null
               and not (l_resource[k] = any (v_diverged))
               and not (array(select jsonb_array_elements_text(l_chosen[k]::jsonb)::bigint)
                        && (sp_seat || v_seats_id)) then
                -- its best seats, chosen by the batch from its read of the
                -- free seats under these locks (hf_seats_free), labels in
                -- the plan's order: the application's own choice, never a
                -- client's (seat_pins_live and the pins' guard still
                -- refuse a seat taken, off sale or of another section)
                v_labels := array(select jsonb_array_elements_text(l_seats[k]::jsonb));
                v_chosen := array(select jsonb_array_elements_text(l_chosen[k]::jsonb)::bigint);
                if cardinality(v_chosen) <> l_qty[k] or cardinality(v_labels) <> l_qty[k] then
                    perform hf_bad_input(format('%s: chosen seats must be as many as its qty',
                                                l_product[k]));
                end if;
                v_seats_l := v_seats_l || array_fill(k, array[l_qty[k]]);
                v_seats_id := v_seats_id || v_chosen;
                l_named[k] := l_name[k] || ' — ' || array_to_string(v_labels, ', ');
                c_named[i] := true;
                continue;
            elsif l_claim[k] = 'seats' and l_apart[k] is not null
                  and not (l_resource[k] = any (v_diverged)) then
                -- no stretch of the batch's read holds them: the best
                -- split it found, offered (as hf_seat_choose offers it)
                v_status[i] := 'not_together';
                v_detail[i] := jsonb_build_object(
                    'product', l_product[k], 'seats', '[]'::jsonb,
                    'offers', coalesce(l_apart[k]::jsonb->'offers', '[]'),
                    'split_allowed', coalesce((l_apart[k]::jsonb->>'split_allowed')::boolean, false));
            elsif l_claim[k] = 'seats' then
                if l_chosen[k] is not null or l_apart[k] is not null then
                    -- the batch's choice no longer holds in this section
                    v_diverged := v_diverged || l_resource[k];
                end if;
                -- its seats, chosen under its section's lock around the
                -- seats the batch chose before
                if v_one_section then
                    v_exclude := sp_seat;
                else
                    v_exclude := array(select sp_seat[x] from generate_subscripts(sp_seat, 1) x
                                        where l_resource[sp_l[x]] = l_resource[k]);
                end if;
                -- (the labels of seats the batch chose are not a shopper's:
                -- that line asks for the best)
                v_labels := case when l_seats[k] is not null and l_chosen[k] is null
                                 then array(select jsonb_array_elements_text(l_seats[k]::jsonb)) end;
                select * into v_choice from hf_seat_choose(l_resource[k], v_labels, l_qty[k],
                                                           l_together[k], v_exclude);
                if v_choice.status = 'chosen' then
                    v_seats_l := v_seats_l || array_fill(k, array[cardinality(v_choice.seat_ids)]);
                    v_seats_id := v_seats_id || v_choice.seat_ids;
                    l_named[k] := l_name[k] || ' — ' || array_to_string(v_choice.labels, ', ');
                    c_named[i] := true;
                    continue;
                end if;
                v_status[i] := v_choice.status;
                if v_choice.status = 'sold_out' then
                    v_detail[i] := jsonb_build_object('lines', hf_short_lines(
                        array[l_product[k]], array[l_qty[k]], array[v_choice.free]));
                else
                    -- seats_taken, unknown_seats, not_together: the seats,
                    -- and others offered
                    v_detail[i] := jsonb_build_object(
                        'product', l_product[k], 'seats', to_jsonb(coalesce(v_choice.taken, '{}')),
                        'offers', coalesce(v_choice.offers, '[]'),
                        'split_allowed', coalesce(v_choice.split_allowed, false));
                end if;
            elsif l_claim[k] = 'table' then
                -- its party: the table or joined set its room gives it for
                -- its stay (hf_free_sets, the best first), around the
                -- tables the batch chose before
                v_tables := null;
                -- (one row: a product with no dining time reads as nulls)
                select * into v_terms from hf_table_terms(l_product[k], l_qty[k]);
                if v_terms.room is not null then
                    v_during := tstzrange(v_terms.starts_at, v_terms.starts_at + v_terms.turn, '[)');
                    select f.tables into v_tables
                      from hf_free_sets(v_terms.room, l_qty[k], v_during, null)
                           with ordinality as f(set_id, tables, max_party, joined, idle, priority, n)
                     where not exists (select 1 from unnest(tp_room, tp_table, tp_during) as b(room, t, d)
                                        where b.room = v_terms.room and b.t = any (f.tables)
                                          and b.d && v_during)
                     order by f.n
                     limit 1;
                end if;
                if v_tables is not null then
                    l_room[k] := v_terms.room;
                    l_during[k] := v_during;
                    l_tables[k] := to_jsonb(v_tables);
                    l_deposit[k] := v_terms.deposit_per_cover;
                    l_cancel[k] := v_terms.cancel_until;
                    tp_room := tp_room || array_fill(v_terms.room, array[cardinality(v_tables)]);
                    tp_table := tp_table || v_tables;
                    tp_during := tp_during || array_fill(v_during, array[cardinality(v_tables)]);
                    continue;
                end if;
                v_status[i] := 'no_table';
                v_detail[i] := jsonb_build_object('lines', hf_short_lines(
                    array[l_product[k]], array[l_qty[k]], array[0]));
            else
                continue;
            end if;
            -- refused: the tables an earlier line of it chose stay free
            tp_room := tp_room[1 : v_mark];
            tp_table := tp_table[1 : v_mark];
            tp_during := tp_during[1 : v_mark];
            continue checkouts;
        end loop;

        -- granted: its order (and a basket of holds when it holds
        -- several), and what the batch has left for the rest
        v_status[i] := 'started';
        v_order[i] := gen_random_uuid();
        if c_h1[i] <> c_h2[i] then
            v_basket[i] := gen_random_uuid();
        end if;
        for h in c_h1[i] .. c_h2[i] loop
            r_left[h_r[h]] := r_left[h_r[h]] - h_qty[h];
            r_granted[h_r[h]] := r_granted[h_r[h]] + h_qty[h];
            if h_agroup[h] is not null then
                v_agranted[h_agroup[h]] := v_agranted[h_agroup[h]] + h_units[h];
            end if;
        end loop;
        if v_capped then
            for k in c_l1[i] .. c_l2[i] loop
                if l_egroup[k] is not null then
                    v_egranted[l_egroup[k]] := v_egranted[l_egroup[k]] + l_qty[k];
                end if;
            end loop;
        end if;
        if c_pins[i] then
            sp_l := sp_l || v_seats_l;
            sp_seat := sp_seat || v_seats_id;
        end if;
    end loop;

    -- every granted hold's id (time-ordered), and each order's purchase:
    -- its one hold, or its basket
    select array_agg(case when v_status[h.ck] = 'started' then hf_uuid_v7() end order by h.n)
      into h_id
      from unnest(h_ck) with ordinality as h(ck, n);
    select array_agg(coalesce(c.basket, h_id[c.h1]) order by c.n)
      into v_purchase
      from unnest(v_basket, c_h1) with ordinality as c(basket, h1, n);

    -- The orders, in key order (two batches sharing keys wait on each
    -- other's orders in one direction only); a key that gets its order
    -- from a transaction that commits first writes nothing more, and is
    -- that order.
    insert into orders (id, token, checkout_key, customer_name, customer_email, customer_phone,
                        currency, amount_minor, provider, email_key, client_address,
                        voucher_code, discount_minor, hold_id)
    select c.id, c.token, c.key, c.name, c.email, c.phone, c.currency, c.amount, c.provider,
           c.email_key, c.address, c.voucher, c.discount, c.purchase
      from unnest(v_status, v_order, c_token, c_key, c_name, c_email, c_phone, c_currency,
                  c_amount, c_provider, c_email_key, c_address, c_voucher, c_discount, v_purchase)
           with ordinality as c(status, id, token, key, name, email, phone, currency, amount,
                                provider, email_key, address, voucher, discount, purchase, n)
     where c.status = 'started'
     order by c.key, c.n
    on conflict (checkout_key) do nothing;
    get diagnostics v_written = row_count;
    select count(*) into v_started from unnest(v_status) x where x = 'started';
    if v_written < v_started then
        for i in 1 .. v_n loop
            continue when v_status[i] is distinct from 'started'
                       or exists (select 1 from orders o where o.id = v_order[i]);
            select o.id into v_found from orders o where o.checkout_key = c_key[i];
            v_status[i] := 'already_started';
            v_order[i] := v_found;
            v_purchase[i] := null;
        end loop;
    end if;

    -- each started order's lines, its holds and their history, its pins
    -- and its bookings: one statement each for the batch
    insert into order_lines (order_id, product_id, name, qty, unit_price_minor, paid_minor)
    select v_order[l.ck], l.product, l.name, l.qty, l.price, l.paid
      from unnest(l_ck, l_product, l_named, l_qty, l_price, l_paid)
           as l(ck, product, name, qty, price, paid)
     where v_status[l.ck] = 'started';
    insert into holds (id, basket_id, resource_id, account_id, qty, idempotency_key, expires_at)
    select h.id, v_basket[h.ck], h.resource, c_account[h.ck], h.qty, c_key[h.ck], v_now + s.hold_ttl
      from unnest(h_ck, h_id, h_resource, h_qty) as h(ck, id, resource, qty)
     where v_status[h.ck] = 'started';
    insert into hold_events (hold_id, kind, to_state, actor, detail)
    select h.id, 'held', 'held', c_account[h.ck],
           case when v_basket[h.ck] is null
                then jsonb_build_object('qty', h.qty, 'ttl_seconds', extract(epoch from s.hold_ttl))
                else jsonb_build_object('qty', h.qty, 'basket_id', v_basket[h.ck],
                                        'ttl_seconds', extract(epoch from s.hold_ttl)) end
      from unnest(h_ck, h_id, h_qty) as h(ck, id, qty)
     where v_status[h.ck] = 'started';
    -- one counter update per resource; the CHECK still has the last word
    update resources x
       set held = x.held + g.qty, next_expiry = least(x.next_expiry, v_now + s.hold_ttl),
           updated_at = v_now
      from (select h.resource, sum(h.qty) as qty
              from unnest(h_ck, h_resource, h_qty) as h(ck, resource, qty)
             where v_status[h.ck] = 'started'
             group by 1) g
     where x.id = g.resource;
    if cardinality(sp_seat) > 0 then
        insert into seat_pins (seat_id, hold_id)
        select p.seat, h_id[l_h[p.l]]
          from unnest(sp_l, sp_seat) as p(l, seat)
         where v_status[l_ck[p.l]] = 'started';
    end if;
    if cardinality(tp_room) > 0 then
        insert into table_pins (hold_id, room, table_id, during)
        select h_id[l_h[k]], l_room[k], t.id, l_during[k]
          from generate_subscripts(l_ck, 1) k, jsonb_array_elements_text(l_tables[k]) as t(id)
         where l_tables[k] is not null and v_status[l_ck[k]] = 'started';
        insert into bookings (hold_id, order_id, room, product_id, party, starts_at, ends_at,
                              tables, deposit_per_cover_minor, cancel_until)
        select h_id[l_h[k]], v_order[l_ck[k]], l_room[k], l_product[k], l_qty[k],
               lower(l_during[k]), upper(l_during[k]),
               array(select jsonb_array_elements_text(l_tables[k])), l_deposit[k], l_cancel[k]
          from generate_subscripts(l_ck, 1) k
         where l_tables[k] is not null and v_status[l_ck[k]] = 'started';
    end if;

    -- a started order whose seats name its lines says so
    for i in 1 .. v_n loop
        continue when not c_named[i] or v_status[i] is distinct from 'started';
        v_detail[i] := jsonb_build_object('lines', (
            select jsonb_agg(jsonb_build_object('product', l_product[k], 'name', l_named[k])
                             order by k)
              from generate_series(c_l1[i], c_l2[i]) k));
    end loop;
    -- a form sent twice in one batch is its first's: the same order, or
    -- the same refusal
    for i in 1 .. v_n loop
        continue when c_first[i] = i;
        v_r := c_first[i];
        v_status[i] := case when v_status[v_r] = 'started' then 'already_started'
                            else v_status[v_r] end;
        v_order[i] := v_order[v_r];
        v_detail[i] := case when v_status[v_r] = 'started' then null else v_detail[v_r] end;
    end loop;

    return query
        select c.status, c.id, c.purchase, o.number, now(), c.detail
          from unnest(v_status, v_order, v_purchase, v_detail) with ordinality
               as c(status, id, purchase, detail, n)
          left join orders o on o.id = c.id
         order by c.n;
end;
$function$;

-- hf_start_checkouts_chosen (last written by 0250_seats_chosen_ahead.sql)
CREATE OR REPLACE FUNCTION public.hf_start_checkouts_chosen(p_checkouts jsonb)
 RETURNS TABLE(status text, order_id uuid, hold_id uuid, number text, created_at timestamp with time zone, detail jsonb)
 LANGUAGE plpgsql
 SET jit TO 'off'
AS $function$
declare
    v_checkouts jsonb := p_checkouts;
    v_c integer[];
    v_l integer[];
    v_product text[];
    v_seat bigint[];
    v_bad_c integer[];
    v_bad_l integer[];
    v_seated integer[] := '{}';
    v_row record;
    v_i integer := 0;
    v_pinned jsonb;
begin
    -- hf_start_checkouts says what is wrong with a call that is no list,
    -- or whose checkouts carry no lists
    if jsonb_typeof(p_checkouts) = 'array'
       and not exists (select 1 from jsonb_array_elements(p_checkouts) c
                        where jsonb_typeof(c->'lines') is distinct from 'array'
                           or jsonb_typeof(coalesce(c->'uses', '[]')) <> 'array') then
        if exists (select 1
                     from jsonb_array_elements(p_checkouts) c,
                          jsonb_array_elements(c->'lines') l,
                          jsonb_array_elements(case jsonb_typeof(l->'chosen')
                                               when 'array' then l->'chosen' else '[]' end) i(v)
                    where i.v::text !~ '^[1-9][0-9]{0,17}$') then
            perform hf_bad_input('chosen seats are seat ids');
        end if;
        -- its locks, in its order: the e-mails' and addresses' keys, then
        -- every resource of the batch, ascending
        perform hf_limit_lock(k.k)
           from (select distinct k
                   from jsonb_array_elements(p_checkouts) c,
                        unnest(array[c->>'email_key', c->>'address']) k
                  where k is not null order by k) k;
        perform 1 from resources x
         where x.id in (select l->>'resource'
                          from jsonb_array_elements(p_checkouts) c,
                               jsonb_array_elements(c->'lines') l
                        union
                        select u->>'resource'
                          from jsonb_array_elements(p_checkouts) c,
                               jsonb_array_elements(coalesce(c->'uses', '[]')) u)
         order by x.id for no key update;
        -- every seat chosen: its checkout, its line, its section
        select array_agg(c.n - 1), array_agg(l.n - 1), array_agg(l.v->>'product'),
               array_agg(i.id::bigint)
          into v_c, v_l, v_product, v_seat
          from jsonb_array_elements(p_checkouts) with ordinality c(v, n),
               jsonb_array_elements(c.v->'lines') with ordinality l(v, n),
               jsonb_array_elements_text(case jsonb_typeof(l.v->'chosen')
                                         when 'array' then l.v->'chosen' else '[]' end) as i(id);
        -- each looked up by its keys (offset 0 keeps them lookups: the
        -- planner would scan every seat and every pin to hash them)
        select coalesce(array_agg(b.c), '{}'), coalesce(array_agg(b.l), '{}')
          into v_bad_c, v_bad_l
          from (select distinct u.c, u.l
                  from unnest(v_c, v_l, v_product, v_seat) as u(c, l, product, seat)
                  left join lateral (select s.section, s.state, s.access from seats s
                                      where s.id = u.seat offset 0) s on true
                  left join lateral (select p.seat_id from seat_pins p
                                      where p.seat_id = u.seat and p.live offset 0) p on true
                 where s.section is distinct from u.product or s.state <> 'open'
                    or s.access <> 'none' or p.seat_id is not null) b;
        -- those lines lose their choice, in one pass over the batch
        if cardinality(v_bad_c) > 0 then
            select jsonb_agg(case when c.n - 1 = any (v_bad_c) then
                       c.v || jsonb_build_object('lines', (
                           select jsonb_agg(case when exists (
                                                  select 1 from unnest(v_bad_c, v_bad_l) b(c, l)
                                                   where b.c = c.n - 1 and b.l = l.n - 1)
                                             then (l.v - 'chosen') || '{"seats": null}'
                                             else l.v end order by l.n)
                             from jsonb_array_elements(c.v->'lines') with ordinality l(v, n)))
                       else c.v end order by c.n)
              into v_checkouts
              from jsonb_array_elements(p_checkouts) with ordinality c(v, n);
        end if;
        -- the checkouts with seats
        select coalesce(array_agg(distinct c.n), '{}')
          into v_seated
          from jsonb_array_elements(v_checkouts) with ordinality c(v, n),
               jsonb_array_elements(c.v->'lines') l(v)
         where l.v->>'claim' = 'seats';
    end if;
    -- each started one with seats says which it was given
    for v_row in select * from hf_start_checkouts(v_checkouts) loop
        v_i := v_i + 1;
        if v_row.status = 'started' and v_i = any (v_seated) then
            select jsonb_object_agg(x.resource_id, x.seats)
              into v_pinned
              from (select h.resource_id, jsonb_agg(p.seat_id order by p.seat_id) as seats
                      from holds h join seat_pins p on p.hold_id = h.id and p.live
                     where h.purchase_id = v_row.hold_id
                     group by h.resource_id) x;
            v_row.detail := coalesce(v_row.detail, '{}') || jsonb_build_object('pinned', v_pinned);
        end if;
        status := v_row.status;
        order_id := v_row.order_id;
        hold_id := v_row.hold_id;
        number := v_row.number;
        created_at := v_row.created_at;
        detail := v_row.detail;
        return next;
    end loop;
end;
$function$;

-- hf_start_payment (last written by 0013_one_engine.sql)
CREATE OR REPLACE FUNCTION public.hf_start_payment(p_purchases uuid[], p_windows interval[], p_now timestamp with time zone, p_actor text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
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
$function$;

-- hf_status (last written by 0002_inventory_functions.sql)
CREATE OR REPLACE FUNCTION public.hf_status(p_resource text)
 RETURNS TABLE(resource_id text, total integer, held integer, sold integer, available integer, held_plain integer, held_paying integer, due integer, available_now integer)
 LANGUAGE sql
 STABLE
AS $function$
    select r.id, r.total, r.held, r.sold, r.total - r.held - r.sold,
           p.held_plain, q.held_paying, p.due, r.total - r.held - r.sold + p.due
      from resources r,
           lateral (select coalesce(sum(h.qty), 0)::integer as held_plain,
                           coalesce(sum(h.qty) filter (where h.expires_at <= clock_timestamp()), 0)::integer as due
                      from holds h where h.resource_id = r.id and h.state = 'held') p,
           lateral (select coalesce(sum(h.qty), 0)::integer as held_paying
                      from holds h where h.resource_id = r.id and h.state = 'awaiting_payment') q
     where r.id = p_resource;
$function$;

-- hf_stock (last written by 0011_fair_sale.sql)
CREATE OR REPLACE FUNCTION public.hf_stock(p_resource text)
 RETURNS TABLE(available_now integer, pending integer, first_ends_at timestamp with time zone)
 LANGUAGE plpgsql
 STABLE
AS $function$
declare
    v_due integer;
begin
    select coalesce(sum(h.qty), 0)::integer into v_due
      from holds h
     where h.resource_id = p_resource and h.state = 'held' and h.expires_at <= now();
    return query
        select r.total - r.held - r.sold + v_due, r.held - v_due,
               least((select min(h.expires_at) from holds h
                       where h.resource_id = r.id and h.state = 'held' and h.expires_at > now()),
                     (select min(h.payment_deadline) from holds h
                       where h.resource_id = r.id and h.state = 'awaiting_payment'))
          from resources r
         where r.id = p_resource;
end;
$function$;

-- hf_sweep (last written by 0002_inventory_functions.sql)
CREATE OR REPLACE FUNCTION public.hf_sweep(p_limit integer DEFAULT 1000, p_actor text DEFAULT 'sweeper'::text)
 RETURNS TABLE(resource_id text, expired_holds integer, expired_qty integer)
 LANGUAGE plpgsql
AS $function$
declare
    v_id text;
    v_left integer := p_limit;
    v_row record;
begin
    for v_id in select * from hf_due_resources() loop
        exit when v_left <= 0;
        select * into v_row from hf_sweep_resource(v_id, v_left, p_actor);
        if v_row.expired_holds > 0 then
            resource_id := v_id;
            expired_holds := v_row.expired_holds;
            expired_qty := v_row.expired_qty;
            v_left := v_left - v_row.expired_holds;
            return next;
        end if;
    end loop;
end;
$function$;

-- hf_sweep_resource (last written by 0002_inventory_functions.sql)
CREATE OR REPLACE FUNCTION public.hf_sweep_resource(p_resource text, p_limit integer DEFAULT 1000, p_actor text DEFAULT 'sweeper'::text)
 RETURNS TABLE(resource_id text, expired_holds integer, expired_qty integer)
 LANGUAGE plpgsql
AS $function$
declare
    r resources;
    v_now timestamptz;
    v_plain record;
    v_paying record;
begin
    if p_limit is null or p_limit <= 0 then
        perform hf_bad_input(format('sweep limit must be positive, got %s', coalesce(p_limit::text, 'null')));
    end if;
    if p_actor is null or length(p_actor) not between 1 and 200 then
        perform hf_bad_input('actor must be 1 to 200 characters');
    end if;
    -- lock: this resource
    select * into r from resources x where x.id = p_resource for no key update;
    if not found then
        return;
    end if;
    v_now := clock_timestamp();
    select 0 as expired_holds, 0 as expired_qty into v_plain;
    select 0 as expired_holds, 0 as expired_qty into v_paying;
    if r.next_expiry <= v_now then
        select * into v_plain from hf_expire_due_plain(p_resource, v_now, p_actor, p_limit);
    end if;
    if r.next_deadline <= v_now and v_plain.expired_holds < p_limit then
        select * into v_paying from hf_expire_due_paying(p_resource, v_now, p_actor, p_limit - v_plain.expired_holds);
    end if;
    return query select p_resource, v_plain.expired_holds + v_paying.expired_holds,
                        v_plain.expired_qty + v_paying.expired_qty;
end;
$function$;

-- hf_table_terms (last written by 0160_tables.sql)
CREATE OR REPLACE FUNCTION public.hf_table_terms(p_product text, p_party integer, OUT room text, OUT starts_at timestamp with time zone, OUT turn interval, OUT deposit_per_cover bigint, OUT cancel_until timestamp with time zone)
 RETURNS record
 LANGUAGE sql
 STABLE
AS $function$
    select t.room, t.starts_at,
           make_interval(mins => coalesce(
               (select u.minutes from dining_turns u
                 where u.room = t.room and u.up_to_party >= p_party
                 order by u.up_to_party limit 1),
               (select u.minutes from dining_turns u
                 where u.room = t.room order by u.up_to_party desc limit 1),
               120)),
           case when p_party >= pe.deposit_from_party then p.price_minor else 0 end,
           t.starts_at - make_interval(hours => pe.cancel_hours)
      from dining_times t
      join products p on p.id = t.product_id
      join dining_periods pe on pe.room = t.room and pe.name = t.period
     where t.product_id = p_product;
$function$;

-- hf_take_tokens (last written by 0011_fair_sale.sql)
CREATE OR REPLACE FUNCTION public.hf_take_tokens(p_keys text[], p_capacity double precision, p_per_second double precision)
 RETURNS TABLE(key text, wanted integer, granted integer, retry_after_seconds double precision)
 LANGUAGE plpgsql
AS $function$
begin
    if p_capacity < 1 or p_per_second <= 0 then
        perform hf_bad_input('a bucket holds at least one token and refills');
    end if;
    if coalesce(cardinality(p_keys), 0) not between 1 and 10000
       or exists (select 1 from unnest(p_keys) k where k is null) then
        perform hf_bad_input('take tokens for 1 to 10000 keys, none of them null');
    end if;
    perform set_config('synchronous_commit', 'off', true);
    return query
    with wanted as (
        select k as key, count(*)::integer as n from unnest(p_keys) k group by k
    ), taken as (
        -- a new bucket starts full; `granted` carries what is wanted (at
        -- most the capacity) into the conflict branch as excluded.granted
        insert into rate_buckets as b (key, tokens, refreshed_at, granted)
        select w.key, p_capacity - least(w.n, floor(p_capacity)), now(),
               least(w.n, floor(p_capacity))::integer
          from wanted w order by w.key
        on conflict on constraint rate_buckets_pkey do update
           set granted = least(excluded.granted,
                               floor(least(p_capacity, b.tokens + greatest(extract(epoch from now() - b.refreshed_at), 0) * p_per_second)))::integer,
               tokens = least(p_capacity, b.tokens + greatest(extract(epoch from now() - b.refreshed_at), 0) * p_per_second)
                        - least(excluded.granted,
                                floor(least(p_capacity, b.tokens + greatest(extract(epoch from now() - b.refreshed_at), 0) * p_per_second))),
               refreshed_at = now()
        returning b.key, b.tokens, b.granted
    )
    select w.key, w.n, t.granted,
           case when t.granted < w.n then (1 - t.tokens) / p_per_second else 0 end
      from wanted w join taken t on t.key = w.key;
end;
$function$;

-- hf_units_held_by_email (last written by 0081_settling_counts_toward_limits.sql)
CREATE OR REPLACE FUNCTION public.hf_units_held_by_email(p_email_key text, p_product text)
 RETURNS integer
 LANGUAGE plpgsql
 STABLE
AS $function$
begin
    return (select coalesce(sum(l.qty), 0)::int
              from orders o join order_lines l on l.order_id = o.id
             where o.email_key = p_email_key and o.state in ('pending', 'settling') and l.product_id = p_product
               and hf_purchase_live(o.hold_id));
end;
$function$;

-- hf_upsert_resource (last written by 0073_waitlist_line_rules.sql)
CREATE OR REPLACE FUNCTION public.hf_upsert_resource(p_id text, p_total integer)
 RETURNS TABLE(status text, resource_id text, total integer, held integer, sold integer, available integer)
 LANGUAGE plpgsql
AS $function$
declare
    r resources;
    v_now timestamptz;
    v_aside integer := 0;
begin
    if p_id is null or length(p_id) not between 1 and 200 then
        perform hf_bad_input('resource id must be 1 to 200 characters');
    end if;
    if p_total is null or p_total < 0 then
        perform hf_bad_input(format('total must be zero or more, got %s', coalesce(p_total::text, 'null')));
    end if;

    insert into resources as x (id, total) values (p_id, p_total)
    on conflict (id) do nothing
    returning x.* into r;
    if found then
        return query select 'created', r.id, r.total, r.held, r.sold, r.total - r.held - r.sold;
        return;
    end if;

    -- lock: this resource
    select * into r from resources x where x.id = p_id for no key update;
    v_now := clock_timestamp();
    if r.next_expiry <= v_now and r.held + r.sold > p_total then
        perform hf_expire_due_plain(p_id, v_now, 'lazy-expiry', null);
        select * into r from resources x where x.id = p_id;
    end if;
    if r.held + r.sold > p_total then
        v_aside := hf_release_aside(p_id, v_now);
        select * into r from resources x where x.id = p_id;
    end if;
    if r.held + r.sold > p_total then
        if v_aside > 0 then
            -- refused: what was set aside goes back to the line
            perform hf_hand_over(p_id, v_now);
            select * into r from resources x where x.id = p_id;
        end if;
        return query select 'capacity_below_committed', r.id, r.total, r.held, r.sold, r.total - r.held - r.sold;
        return;
    end if;
    update resources x set total = p_total, updated_at = v_now where x.id = p_id returning x.* into r;
    if p_total > r.held + r.sold then
        perform hf_hand_over(p_id, v_now);
        select * into r from resources x where x.id = p_id;
    end if;
    return query select 'updated', r.id, r.total, r.held, r.sold, r.total - r.held - r.sold;
end;
$function$;

-- hf_uuid_v7 (last written by 0006_combined_holds.sql)
CREATE OR REPLACE FUNCTION public.hf_uuid_v7()
 RETURNS uuid
 LANGUAGE sql
AS $function$
    select encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    placing substring(int8send((extract(epoch from clock_timestamp()) * 1000)::bigint) from 3)
                    from 1 for 6),
            52, 1), 53, 1),
        'hex')::uuid;
$function$;

-- hf_waitlist_claimed (last written by 0070_waiting_list.sql)
CREATE OR REPLACE FUNCTION public.hf_waitlist_claimed()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
    update waitlist_entries set state = 'claimed'
     where order_id = new.id and state in ('offered', 'lapsed');
    return null;
end;
$function$;

-- hf_walk_in (last written by 0290_walk_in_once.sql)
CREATE OR REPLACE FUNCTION public.hf_walk_in(p_room text, p_party integer, p_set text, p_name text, p_by text, p_now timestamp with time zone, p_once uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET jit TO 'off'
AS $function$
declare
    v_set   record;
    v_id    uuid;
    v_until timestamptz;
    v_tables text[];
begin
    if p_party is null or p_party not between 1 and 100 then
        perform hf_bad_input('a party is 1 to 100 guests');
    end if;
    -- lock: the room's nearest time's counters, then the room (the
    -- engine's order); writing the counters row tells memory
    perform 1 from resources r
     where r.id = (select t.resource_id from dining_times t where t.room = p_room
                    order by abs(extract(epoch from t.starts_at - p_now)), t.starts_at
                    limit 1)
       for no key update;
    perform 1 from dining_rooms where collection = p_room and archived_at is null
       for no key update;
    if not found then
        return jsonb_build_object('outcome', 'unknown_room');
    end if;
    -- the same form sent again (an answer lost in a failover): the party
    -- it seated, not a second table
    select w.id, w.tables, w.until into v_id, v_tables, v_until
      from walk_ins w where w.id = p_once and w.room = p_room;
    if found then
        return jsonb_build_object('outcome', 'seated', 'again', true, 'id', v_id,
                                  'tables', to_jsonb(v_tables), 'until', v_until);
    end if;
    if exists (select 1 from walk_ins w where w.id = p_once) then
        return jsonb_build_object('outcome', 'not_ours');
    end if;
    if p_set is not null
       and not exists (select 1 from dining_tables where room = p_room and id = p_set and archived_at is null)
       and not exists (select 1 from dining_joins where room = p_room and id = p_set and archived_at is null) then
        return jsonb_build_object('outcome', 'unknown_set');
    end if;
    select f.set_id, f.tables, f.turn, f.taken_at into v_set
      from hf_walk_in_sets(p_room, p_party, p_now)
           with ordinality as f(set_id, tables, max_party, joined, turn, taken_at, n)
     where p_set is null or f.set_id = p_set
     order by f.n
     limit 1;
    if not found then
        if p_set is null then
            return jsonb_build_object('outcome', 'none_free');
        end if;
        if exists (select 1 from dining_tables where room = p_room and id = p_set
                      and p_party between min_party and max_party)
           or exists (select 1 from dining_joins where room = p_room and id = p_set
                         and p_party between min_party and max_party) then
            return jsonb_build_object('outcome', 'not_free');
        end if;
        return jsonb_build_object('outcome', 'does_not_fit');
    end if;
    v_until := least(p_now + v_set.turn, coalesce(v_set.taken_at, 'infinity'));
    insert into walk_ins (id, room, party, name, tables, seated_at, until, seated_by)
    values (coalesce(p_once, hf_uuid_v7()), p_room, p_party, coalesce(trim(p_name), ''),
            v_set.tables, p_now, v_until, p_by)
    returning id into v_id;
    insert into table_pins (walk_in, room, table_id, during)
    select v_id, p_room, x.id, tstzrange(p_now, v_until, '[)') from unnest(v_set.tables) as x(id);
    update resources r set held = r.held
     where r.id = (select t.resource_id from dining_times t where t.room = p_room
                    order by abs(extract(epoch from t.starts_at - p_now)), t.starts_at
                    limit 1);
    return jsonb_build_object('outcome', 'seated', 'id', v_id, 'tables', to_jsonb(v_set.tables),
                              'until', v_until);
end;
$function$;

-- hf_walk_in_left (last written by 0260_walk_ins.sql)
CREATE OR REPLACE FUNCTION public.hf_walk_in_left(p_room text, p_id uuid, p_now timestamp with time zone)
 RETURNS text
 LANGUAGE plpgsql
AS $function$
declare
    w walk_ins;
begin
    perform 1 from resources r
     where r.id = (select t.resource_id from dining_times t where t.room = p_room
                    order by abs(extract(epoch from t.starts_at - p_now)), t.starts_at
                    limit 1)
       for no key update;
    select * into w from walk_ins where id = p_id and room = p_room for update;
    if not found then
        return 'not_found';
    end if;
    if w.left_at is not null then
        return 'left_before';
    end if;
    update walk_ins set left_at = greatest(p_now, seated_at) where id = p_id;
    update table_pins set live = false where walk_in = p_id and live;
    update resources r set held = r.held
     where r.id = (select t.resource_id from dining_times t where t.room = p_room
                    order by abs(extract(epoch from t.starts_at - p_now)), t.starts_at
                    limit 1);
    return 'left';
end;
$function$;

-- hf_walk_in_sets (last written by 0260_walk_ins.sql)
CREATE OR REPLACE FUNCTION public.hf_walk_in_sets(p_room text, p_party integer, p_now timestamp with time zone)
 RETURNS TABLE(set_id text, tables text[], max_party integer, joined boolean, turn interval, taken_at timestamp with time zone)
 LANGUAGE sql
 STABLE
 SET jit TO 'off'
AS $function$
    with turn as (
        select make_interval(mins => coalesce(
            (select u.minutes from dining_turns u
              where u.room = p_room and u.up_to_party >= p_party
              order by u.up_to_party limit 1),
            (select u.minutes from dining_turns u
              where u.room = p_room order by u.up_to_party desc limit 1),
            120)) as turn
    ), sets as (
        select t.id as set_id, array[t.id] as tables, t.min_party, t.max_party,
               t.priority, false as joined
          from dining_tables t
         where t.room = p_room and t.archived_at is null
        union all
        select j.id, j.tables, j.min_party, j.max_party, j.priority, true
          from dining_joins j
         where j.room = p_room and j.archived_at is null
           and (select count(*) from dining_tables t
                 where t.room = p_room and t.id = any (j.tables) and t.archived_at is null)
               = cardinality(j.tables)
    ), free as (
        select s.*, turn.turn,
               (select min(lower(p.during)) from table_pins p
                 where p.room = p_room and p.table_id = any (s.tables) and p.live
                   and lower(p.during) >= p_now
                   and lower(p.during) < p_now + interval '12 hours') as taken_at
          from sets s, turn
         where p_party between s.min_party and s.max_party
           and not exists (select 1 from table_pins p
                            where p.room = p_room and p.table_id = any (s.tables) and p.live
                              and p.during && tstzrange(p_now, p_now + interval '30 minutes', '[)'))
    )
    select f.set_id, f.tables, f.max_party, f.joined, f.turn, f.taken_at
      from free f
     order by f.taken_at is not null and f.taken_at < p_now + f.turn,
              f.max_party, f.joined, f.priority, f.set_id;
$function$;

-- hf_webhook_code_redeemed (last written by 0200_items.sql)
CREATE OR REPLACE FUNCTION public.hf_webhook_code_redeemed()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
    perform hf_webhook_event('code.redeemed', jsonb_build_object(
        'code', new.code,
        'kind', (select k.code from product_kinds k where k.kind = new.kind),
        'order_id', new.order_id,
        'order_token', (select token from orders where id = new.order_id),
        'redeemed_at', new.redeemed_at,
        'redeemed_by', new.redeemed_by,
        'place', new.place,
        'item', (select jsonb_build_object('id', i.id, 'product_id', i.product_id,
                                           'product_kind', new.kind)
                   from order_items i where i.id = new.item_id),
        'seat', (select s.label from order_items c join seats s on s.id = c.seat_id
                  where c.id = new.item_id)));
    return null;
end;
$function$;

-- hf_webhook_event (last written by 0075_webhook_jobs_in_one_statement.sql)
CREATE OR REPLACE FUNCTION public.hf_webhook_event(p_type text, p_data jsonb)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
declare
    v_id     text;
    v_queued integer;
begin
    -- nobody listens, enabled or not: nothing is written
    if not exists (select 1 from webhook_endpoints where p_type = any (events)) then
        return 0;
    end if;
    v_id := 'msg_' || replace(gen_random_uuid()::text, '-', '');
    insert into webhook_messages (id, event_type, payload)
    values (v_id, p_type,
            jsonb_build_object(
                'type', p_type,
                'timestamp', to_char(clock_timestamp() at time zone 'utc',
                                     'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                'data', p_data));
    -- a disabled endpoint's job is kept for a replay: done, never sent
    with queued as (
        insert into outbox_jobs (kind, dedupe_key, payload, state, done_at, last_error)
        select 'webhook', 'webhook:' || e.id || ':' || v_id,
               case when e.disabled_at is null
                    then jsonb_build_object('endpoint_id', e.id, 'message_id', v_id)
                    else jsonb_build_object('endpoint_id', e.id, 'message_id', v_id,
                                            'while_disabled', true) end,
               case when e.disabled_at is null then 'pending' else 'done' end,
               case when e.disabled_at is null then null else now() end,
               case when e.disabled_at is null then null
                    else 'not sent: the endpoint was disabled' end
          from webhook_endpoints e
         where p_type = any (e.events)
         order by e.id
        returning state)
    select count(*) filter (where state = 'pending') into v_queued from queued;
    return v_queued;
end;
$function$;

-- hf_webhook_order (last written by 0180_seating.sql)
CREATE OR REPLACE FUNCTION public.hf_webhook_order(p_order uuid)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
    select jsonb_build_object(
               'id', o.id,
               'token', o.token,
               'state', o.state,
               'amount_minor', o.amount_minor,
               'discount_minor', o.discount_minor,
               'currency', o.currency,
               'provider', o.provider,
               'customer', jsonb_build_object('name', o.customer_name,
                                              'email', o.customer_email),
               'created_at', o.created_at,
               'paid_at', o.paid_at,
               'lines', (select coalesce(jsonb_agg(jsonb_build_object(
                                     'product_id', l.product_id,
                                     'name', l.name,
                                     'qty', l.qty,
                                     'unit_price_minor', l.unit_price_minor,
                                     'paid_minor', coalesce(l.paid_minor,
                                                            l.unit_price_minor * l.qty))
                                     || case when sec.product_id is null then '{}'::jsonb
                                             else jsonb_build_object('seats', coalesce((
                                                 select jsonb_agg(st.label order by st.row_rank, st.run, st.pos)
                                                   from holds h
                                                   join seat_pins p on p.hold_id = h.id
                                                   join seats st on st.id = p.seat_id
                                                  where h.purchase_id = o.hold_id
                                                    and h.resource_id = sec.resource_id
                                                    and (p.live or o.state not in ('pending', 'paid', 'settling'))),
                                                 '[]'::jsonb)) end
                                     order by l.product_id), '[]'::jsonb)
                           from order_lines l
                           left join seat_sections sec on sec.product_id = l.product_id
                          where l.order_id = o.id),
               'items', (select coalesce(jsonb_agg(jsonb_build_object(
                                     'id', i.id,
                                     'code', i.code,
                                     'product_id', i.product_id,
                                     'kind', p.kind,
                                     'state', i.state,
                                     'state_at', i.state_at)
                                     || case when s.id is null then '{}'::jsonb
                                             else jsonb_build_object('seat', s.label) end
                                     || case when b.hold_id is null then '{}'::jsonb
                                             else jsonb_build_object(
                                                 'booking', jsonb_build_object(
                                                     'party', b.party,
                                                     'starts_at', b.starts_at,
                                                     'ends_at', b.ends_at)) end
                                     order by i.id), '[]'::jsonb)
                           from order_items i
                           join products p on p.id = i.product_id
                           left join seats s on s.id = i.seat_id
                           left join bookings b on b.hold_id = i.booking
                          where i.order_id = o.id))
      from orders o where o.id = p_order
$function$;

-- hf_webhook_order_refunded (last written by 0060_outgoing_webhooks.sql)
CREATE OR REPLACE FUNCTION public.hf_webhook_order_refunded()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
declare
    v_refunded bigint;
    v_ordered  bigint;
begin
    select coalesce(sum((u ->> 'qty')::bigint), 0) into v_refunded
      from order_refunds r, jsonb_array_elements(r.units) u
     where r.order_id = new.order_id;
    select coalesce(sum(qty), 0) into v_ordered from order_lines where order_id = new.order_id;
    perform hf_webhook_event('order.refunded', jsonb_build_object(
        'order', hf_webhook_order(new.order_id),
        'refund', jsonb_build_object(
            'id', new.id,
            'amount_minor', new.amount_minor,
            'units', new.units,
            'reason', new.reason,
            'restocked', new.restocked,
            'whole', v_refunded >= v_ordered,
            'created_at', new.created_at)));
    return null;
end;
$function$;

-- hf_webhook_order_state (last written by 0090_settling.sql)
CREATE OR REPLACE FUNCTION public.hf_webhook_order_state()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
    perform hf_webhook_event('order.' || new.state,
                             jsonb_build_object('order', hf_order_view(new.id)));
    return null;
end;
$function$;

-- hf_webhook_stock (last written by 0060_outgoing_webhooks.sql)
CREATE OR REPLACE FUNCTION public.hf_webhook_stock()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
declare
    v_left integer := new.total - new.held - new.sold;
    v_product record;
begin
    for v_product in
        select id from products where resource_id = new.id and active order by id
    loop
        perform hf_webhook_event(
            case when v_left > 0 then 'product.available' else 'product.sold_out' end,
            jsonb_build_object('product_id', v_product.id,
                               'resource_id', new.id,
                               'available', greatest(v_left, 0)));
    end loop;
    return null;
end;
$function$;

-- hold_events_append_only (last written by 0001_inventory_schema.sql)
CREATE OR REPLACE FUNCTION public.hold_events_append_only()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
    raise exception 'hold_events is append-only (% refused)', tg_op
        using errcode = 'restrict_violation';
end;
$function$;

-- holds_lines_immutable (last written by 0001_inventory_schema.sql)
CREATE OR REPLACE FUNCTION public.holds_lines_immutable()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
    raise exception 'a hold''s resource, basket, account and qty never change'
        using errcode = 'restrict_violation';
end;
$function$;

-- order_refunds_append_only (last written by 0012_after_the_sale.sql)
CREATE OR REPLACE FUNCTION public.order_refunds_append_only()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
    raise exception 'order_refunds are append-only (% refused)', tg_op
        using errcode = 'restrict_violation';
end;
$function$;

-- redemptions_append_only (last written by 0012_after_the_sale.sql)
CREATE OR REPLACE FUNCTION public.redemptions_append_only()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
    raise exception 'redemptions are append-only (% refused)', tg_op
        using errcode = 'restrict_violation';
end;
$function$;

-- staff_actions_append_only (last written by 0005_staff.sql)
CREATE OR REPLACE FUNCTION public.staff_actions_append_only()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
    raise exception 'staff_actions is append-only: % refused', tg_op
        using errcode = 'restrict_violation';
end;
$function$;
