-- Holdfast: combined checkouts. A checkout of one product holds one
-- resource, so concurrent checkouts of a hot ticket tier queue on that
-- tier's row lock twice: once to hold and write the pending order, once to
-- start the payment phase after the provider answered. A process gathers
-- the checkouts waiting for one resource and sends each step here for the
-- lot: one call, one lock, one commit. Each checkout is still answered on
-- its own, and an order is still written in the same transaction as its
-- hold (SPEC §3): either both are there or neither is.

-- Step one for a batch of one-product checkouts on p_resource: the pending
-- order, its line and its hold, together, in the order given. The holds are
-- decided by hf_hold_many with the checkout key as the idempotency key.
--
-- Locks, as on the basket path: each order row is written first, then the
-- resource is locked. A form submitted twice at once (even down the other
-- path, with another basket) waits on its order's unique key, not on the
-- resource, and then finds that order.
--
-- status: started | already_started | insufficient | account_cap |
--         unknown_resource | key_in_use (a hold outside checkout has the key)
create function hf_start_checkouts(
    p_resource text,
    p_keys text[], p_accounts text[], p_qtys integer[],
    p_products text[], p_product_names text[], p_unit_prices bigint[], p_currencies text[],
    p_tokens text[], p_names text[], p_emails text[], p_providers text[])
returns table (status text, order_id uuid, hold_id uuid, available integer, created_at timestamptz)
language plpgsql as $$
declare
    v_n integer := coalesce(cardinality(p_keys), 0);
    v_status text[] := array_fill(null::text, array[v_n]);
    v_order uuid[] := array_fill(null::uuid, array[v_n]);
    v_hold uuid[] := array_fill(null::uuid, array[v_n]);
    v_avail integer[] := array_fill(null::integer, array[v_n]);
    -- the requests that go to hf_hold_many, by position
    v_idx integer[] := '{}';
    v_existing uuid;
    v_written integer;
    h record;
begin
    if v_n not between 1 and 1000 then
        perform hf_bad_input(format('a batch starts 1 to 1000 checkouts, got %s', v_n));
    end if;
    if coalesce(cardinality(p_accounts), -1) <> v_n or coalesce(cardinality(p_qtys), -1) <> v_n
       or coalesce(cardinality(p_products), -1) <> v_n or coalesce(cardinality(p_product_names), -1) <> v_n
       or coalesce(cardinality(p_unit_prices), -1) <> v_n or coalesce(cardinality(p_currencies), -1) <> v_n
       or coalesce(cardinality(p_tokens), -1) <> v_n or coalesce(cardinality(p_names), -1) <> v_n
       or coalesce(cardinality(p_emails), -1) <> v_n or coalesce(cardinality(p_providers), -1) <> v_n then
        perform hf_bad_input('every checkout needs each of its fields: arrays of one length');
    end if;
    if exists (select 1 from unnest(p_keys) k where k is null) then
        perform hf_bad_input('every checkout needs its checkout key');
    end if;
    if exists (select 1 from unnest(p_qtys, p_unit_prices) as x(q, price)
                where q is null or q <= 0 or price is null or price < 0) then
        perform hf_bad_input('every checkout needs a positive qty and a price');
    end if;

    -- the orders, pending and not yet holding anything; a key that already
    -- has its order (or gets it from a transaction that commits first, or
    -- earlier in this batch) writes nothing
    for i in 1 .. v_n loop
        v_order[i] := gen_random_uuid();
    end loop;
    insert into orders (id, token, checkout_key, customer_name, customer_email, currency,
                        amount_minor, provider)
    select x.order_id, x.token, x.key, x.name, x.email, x.currency, x.price * x.qty, x.provider
      from unnest(v_order, p_tokens, p_keys, p_names, p_emails, p_currencies, p_unit_prices,
                  p_qtys, p_providers)
           with ordinality as x(order_id, token, key, name, email, currency, price, qty, provider, n)
     -- in key order, so two batches sharing keys wait on each other's
     -- orders in one direction only; a key repeated here is written once,
     -- for its first request
     order by x.key, x.n
    on conflict (checkout_key) do nothing;
    get diagnostics v_written = row_count;
    for i in 1 .. v_n loop
        if v_written = v_n or exists (select 1 from orders o where o.id = v_order[i]) then
            v_idx := v_idx || i;
        else
            v_status[i] := 'already_started';
            v_order[i] := null;
        end if;
    end loop;

    if cardinality(v_idx) > 0 then
        -- lock: the resource (inside hf_hold_many); its holds decided in
        -- arrival order
        for h in
            select x.status, x.hold_id, x.available, x.n
              from hf_hold_many(p_resource,
                                (select array_agg(p_qtys[j] order by o) from unnest(v_idx) with ordinality u(j, o)),
                                (select array_agg(p_accounts[j] order by o) from unnest(v_idx) with ordinality u(j, o)),
                                (select array_agg(p_keys[j] order by o) from unnest(v_idx) with ordinality u(j, o)))
                   with ordinality as x(status, hold_id, resource_id, account_id, qty, state, expires_at,
                                        payment_deadline, payment_ref, existing_payment_ref,
                                        other_hold_id, available, extensions, n)
        loop
            v_status[v_idx[h.n]] := h.status;
            v_hold[v_idx[h.n]] := h.hold_id;
            v_avail[v_idx[h.n]] := h.available;
        end loop;
    end if;

    -- Our order is new, yet a hold already has its key: a hold made outside
    -- checkout, which this checkout may not take over (the others of the
    -- batch go on).
    for i in 1 .. v_n loop
        if v_status[i] = 'replayed' then
            v_status[i] := 'key_in_use';
        end if;
    end loop;

    -- each grant's order takes its hold and its line; a refused checkout
    -- leaves no order behind
    update orders o
       set hold_id = x.hold_id
      from unnest(v_order, v_hold, v_status) as x(order_id, hold_id, status)
     where o.id = x.order_id and x.status = 'held';
    insert into order_lines (order_id, product_id, name, qty, unit_price_minor)
    select x.order_id, x.product, x.product_name, x.qty, x.price
      from unnest(v_status, v_order, p_products, p_product_names, p_qtys, p_unit_prices)
           as x(status, order_id, product, product_name, qty, price)
     where x.status = 'held';
    delete from orders o
     using unnest(v_order, v_status) as x(order_id, status)
     where o.id = x.order_id
       and x.status in ('insufficient', 'account_cap', 'unknown_resource', 'key_in_use');

    -- the order each repeated key already has
    for i in 1 .. v_n loop
        if v_status[i] = 'already_started' then
            v_existing := null;
            select o.id into v_existing from orders o where o.checkout_key = p_keys[i];
            v_order[i] := v_existing;
            if v_existing is null then
                -- a key repeated in this batch whose first request was
                -- refused: the same answer as the first
                for j in 1 .. i - 1 loop
                    if p_keys[j] = p_keys[i] and v_status[j] <> 'already_started' then
                        v_status[i] := v_status[j];
                        v_avail[i] := v_avail[j];
                        exit;
                    end if;
                end loop;
            end if;
        elsif v_status[i] <> 'held' then
            v_order[i] := null;
        end if;
    end loop;

    return query
        select case when x.status = 'held' then 'started' else x.status end,
               x.order_id, x.hold_id, x.available, now()
          from unnest(v_status, v_order, v_hold, v_avail) with ordinality as x(status, order_id, hold_id, available, n)
         order by x.n;
end;
$$;

-- Step two for a batch of orders started by hf_start_checkouts on
-- p_resource, after their provider answered: remember each payment page and
-- move each hold into the payment phase with its own window, then empty the
-- shopper's basket. Locks: the orders (ascending id), then the resource, as
-- every other path that touches both takes them.
--
-- status: awaiting_payment | replayed | confirmed | expired | released |
--         not_found (as hf_begin_payment) | not_one_product (nothing done),
--         with the order's state after
create function hf_attach_payments(
    p_resource text, p_orders uuid[], p_window_seconds integer[],
    p_session_ids text[], p_urls text[], p_expires timestamptz[], p_baskets text[])
returns table (order_id uuid, status text, order_state text)
language plpgsql as $$
declare
    s inventory_settings;
    v_n integer := coalesce(cardinality(p_orders), 0);
    v_now timestamptz;
    v_status text[] := array_fill(null::text, array[v_n]);
    v_moved integer := 0;
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
        if h.state = 'confirmed' then
            v_status[i] := 'confirmed';
        elsif h.state in ('released', 'expired') then
            v_status[i] := h.state;
        elsif h.state = 'awaiting_payment' and h.payment_deadline <= v_now then
            perform hf_end_purchase(h.id, 'expired', v_now, 'deadline', 'payment_deadline');
            v_status[i] := 'expired';
        elsif h.state = 'awaiting_payment' then
            -- a retry: the phase started before
            v_status[i] := 'replayed';
        elsif h.expires_at <= v_now then
            -- past its TTL and not paying: it counts as free, so it ends now
            perform hf_end_purchase(h.id, 'expired', v_now, 'lazy-expiry', 'ttl');
            v_status[i] := 'expired';
        else
            v_status[i] := 'awaiting_payment';
            v_moved := v_moved + 1;
        end if;
    end loop;

    if v_moved > 0 then
        with moved as (
            update holds x
               set state = 'awaiting_payment', payment_started_at = v_now,
                   payment_deadline = v_now + p.seconds * interval '1 second'
              from unnest(p_orders, p_window_seconds, v_status) as p(order_id, seconds, status)
              join orders o on o.id = p.order_id
             where p.status = 'awaiting_payment' and x.id = o.hold_id and x.state = 'held'
            returning x.id, x.payment_deadline
        ), logged as (
            insert into hold_events (hold_id, kind, from_state, to_state, actor, detail)
            select id, 'payment_started', 'held', 'awaiting_payment', 'checkout',
                   jsonb_build_object('payment_deadline', payment_deadline)
              from moved
        )
        update resources
           set next_deadline = least(next_deadline, (select min(payment_deadline) from moved)),
               updated_at = v_now
         where id = p_resource;
    end if;

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
