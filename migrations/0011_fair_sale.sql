-- Holdfast: a fair flash sale. Limits per buyer and per client address,
-- decided inside the transaction that holds, from the orders themselves,
-- under an advisory lock per e-mail and per address (taken before any order
-- row and before any resource, on every path), so two web processes enforce
-- one limit and a burst cannot slip past it.

-- A product's most units per order (the pages offer no more).
alter table products
    add column max_per_order integer not null default 10,
    add constraint product_max_per_order check (max_per_order between 1 and 100);

-- Who a pending order counts against: the normalised e-mail and the client
-- address it was started from (null for orders from before limits).
alter table orders
    add column email_key text,
    add column client_address text,
    add constraint order_limit_keys_shape check (length(email_key) <= 254 and length(client_address) <= 64);
create index orders_pending_by_email on orders (email_key) where state = 'pending';
create index orders_pending_by_address on orders (client_address) where state = 'pending';

-- The lock a limit's key is decided under. Its keys never meet the
-- engine's account locks (another prefix); it is always taken before any
-- row lock, in key order, so no cycle can form.
create function hf_limit_lock(p_key text) returns void
language sql as $$
    select pg_advisory_xact_lock(hashtextextended('holdfast.limit:' || p_key, 0));
$$;

-- Whether a purchase still holds its units: held or paying, and inside
-- its time (a lapsed hold the sweeper has not reached yet holds nothing).
create function hf_purchase_live(p_purchase uuid) returns boolean
language sql stable as $$
    select exists (select 1 from holds h
                    where h.purchase_id = p_purchase
                      and h.state in ('held', 'awaiting_payment')
                      and coalesce(h.payment_deadline, h.expires_at) > now());
$$;

-- Units of a product held or awaiting payment by one e-mail. (PL/pgSQL so
-- the plan is kept per connection: a SQL function with a join is planned
-- again on every call.)
create function hf_units_held_by_email(p_email_key text, p_product text) returns integer
language plpgsql stable as $$
begin
    return (select coalesce(sum(l.qty), 0)::int
              from orders o join order_lines l on l.order_id = o.id
             where o.email_key = p_email_key and o.state = 'pending' and l.product_id = p_product
               and hf_purchase_live(o.hold_id));
end;
$$;

-- Units of a resource held or awaiting payment from one client address.
create function hf_units_held_from_address(p_address text, p_resource text) returns integer
language plpgsql stable as $$
begin
    return (select coalesce(sum(l.qty), 0)::int
              from orders o join order_lines l on l.order_id = o.id
                            join products p on p.id = l.product_id
             where o.client_address = p_address and o.state = 'pending' and p.resource_id = p_resource
               and hf_purchase_live(o.hold_id));
end;
$$;

-- Token buckets per client address (basket adds, checkout starts): a row
-- each, refilled by time. `granted` is what the last take granted. A rate
-- limit's state need not survive a crash (after one, every bucket is full
-- again), so the table is unlogged: its writes cost no WAL.
create unlogged table rate_buckets (
    key           text primary key,
    tokens        double precision not null,
    refreshed_at  timestamptz not null default now(),
    granted       integer not null default 0,
    constraint bucket_key_shape check (length(key) between 1 and 128)
);

-- One token for each entry of p_keys (an address may appear several
-- times), from buckets that hold p_capacity and refill at p_per_second (a
-- missing bucket is a full one): per distinct key, how many were granted
-- and, if not all, how long until the next token. One statement writes each
-- bucket once, in key order (so concurrent takes cannot deadlock), for a
-- whole batch of requests, and its commit does not wait for the disk.
create function hf_take_tokens(p_keys text[], p_capacity double precision,
                               p_per_second double precision)
returns table (key text, wanted integer, granted integer, retry_after_seconds double precision)
language plpgsql as $$
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
$$;

-- Step one of a batch of one-product checkouts, now with the limits: as
-- in 0008, and a checkout whose e-mail already holds p_email_caps[i] units
-- of its product, or whose address holds p_address_caps[i] units of the
-- resource (counting the batch's own earlier checkouts), is 'over_limit'
-- (with what is left under the limit) and writes nothing. A null cap is no
-- limit.
drop function hf_start_checkouts(text, text[], text[], integer[], text[], text[], bigint[],
                                 text[], text[], text[], text[], text[]);
create function hf_start_checkouts(
    p_resource text,
    p_keys text[], p_accounts text[], p_qtys integer[],
    p_products text[], p_product_names text[], p_unit_prices bigint[], p_currencies text[],
    p_tokens text[], p_names text[], p_emails text[], p_providers text[],
    p_email_keys text[], p_addresses text[], p_email_caps integer[], p_address_caps integer[])
returns table (status text, order_id uuid, hold_id uuid, available integer, created_at timestamptz)
language plpgsql as $$
declare
    v_used integer;
    v_limited boolean;
    -- per checkout: what its e-mail (of its product) and its address (of
    -- the resource) hold already, and whether an earlier checkout of the
    -- batch shares the key
    v_email_used integer[];
    v_email_seen boolean[];
    v_address_used integer[];
    v_address_seen boolean[];
    -- new checkouts that passed the limits, counted against later ones
    v_counted boolean[] := array_fill(false, array[greatest(coalesce(cardinality(p_keys), 0), 1)]);
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
       or coalesce(cardinality(p_emails), -1) <> v_n or coalesce(cardinality(p_providers), -1) <> v_n
       or coalesce(cardinality(p_email_keys), -1) <> v_n or coalesce(cardinality(p_addresses), -1) <> v_n
       or coalesce(cardinality(p_email_caps), -1) <> v_n
       or coalesce(cardinality(p_address_caps), -1) <> v_n then
        perform hf_bad_input('every checkout needs each of its fields: arrays of one length');
    end if;
    if exists (select 1 from unnest(p_keys) k where k is null) then
        perform hf_bad_input('every checkout needs its checkout key');
    end if;
    if exists (select 1 from unnest(p_qtys, p_unit_prices) as x(q, price)
                where q is null or q <= 0 or price is null or price < 0) then
        perform hf_bad_input('every checkout needs a positive qty and a price');
    end if;

    -- Limits per buyer and per address (see hf_limit_lock). Lock: every
    -- e-mail and address of the batch, in one order, before any order row
    -- and before the resource, as the basket path takes them.
    perform hf_limit_lock(k.k)
       from (select distinct k from unnest(p_email_keys || p_addresses) k
              where k is not null order by k) k;
    -- what each checkout's e-mail already holds of its product, and its
    -- address of the resource, from the orders: one statement each for the
    -- whole batch (their plans are kept; a call per checkout was most of a
    -- batch's time), only when a cap is set
    if exists (select 1 from unnest(p_email_caps, p_email_keys) c(cap, k)
                where c.cap is not null and c.k is not null) then
        select array_agg(coalesce(u.used, 0) order by x.n),
               array_agg(x.seen order by x.n)
          into v_email_used, v_email_seen
          from (select e.email_key, e.product, e.n,
                       count(*) over (partition by e.email_key, e.product order by e.n) > 1 as seen
                  from unnest(p_email_keys, p_products) with ordinality as e(email_key, product, n)) x
          left join lateral (
               select sum(l.qty)::integer as used
                 from orders o join order_lines l on l.order_id = o.id
                where o.email_key = x.email_key and o.state = 'pending'
                  and l.product_id = x.product and hf_purchase_live(o.hold_id)) u on true;
    end if;
    if exists (select 1 from unnest(p_address_caps, p_addresses) c(cap, k)
                where c.cap is not null and c.k is not null) then
        select array_agg(coalesce(u.used, 0) order by x.n),
               array_agg(x.seen order by x.n)
          into v_address_used, v_address_seen
          from (select a.address, a.n,
                       count(*) over (partition by a.address order by a.n) > 1 as seen
                  from unnest(p_addresses) with ordinality as a(address, n)) x
          left join lateral (
               select sum(l.qty)::integer as used
                 from orders o join order_lines l on l.order_id = o.id
                 join products p on p.id = l.product_id
                where o.client_address = x.address and o.state = 'pending'
                  and p.resource_id = p_resource and hf_purchase_live(o.hold_id)) u on true;
    end if;
    -- each checkout that is new (its key has no order, here or earlier in
    -- the batch), in arrival order: what its e-mail and its address hold,
    -- with the batch's own earlier checkouts that passed (summed only for
    -- a key seen earlier in the batch), must leave room for it
    for i in 1 .. v_n loop
        v_order[i] := gen_random_uuid();
        if p_keys[i] = any (p_keys[1 : i - 1]) then
            -- repeated in this batch: its first request decides
            v_order[i] := null;
            continue;
        end if;
        continue when exists (select 1 from orders o where o.checkout_key = p_keys[i]);
        v_limited := false;
        if p_email_caps[i] is not null and p_email_keys[i] is not null then
            v_used := v_email_used[i];
            if v_email_seen[i] then
                for j in 1 .. i - 1 loop
                    if v_counted[j] and p_email_keys[j] = p_email_keys[i]
                       and p_products[j] = p_products[i] then
                        v_used := v_used + p_qtys[j];
                    end if;
                end loop;
            end if;
            if v_used + p_qtys[i] > p_email_caps[i] then
                v_status[i] := 'over_limit';
                v_avail[i] := greatest(p_email_caps[i] - v_used, 0);
                v_limited := true;
            end if;
        end if;
        if not v_limited and p_address_caps[i] is not null and p_addresses[i] is not null then
            v_used := v_address_used[i];
            if v_address_seen[i] then
                for j in 1 .. i - 1 loop
                    if v_counted[j] and p_addresses[j] = p_addresses[i] then
                        v_used := v_used + p_qtys[j];
                    end if;
                end loop;
            end if;
            if v_used + p_qtys[i] > p_address_caps[i] then
                v_status[i] := 'over_limit';
                v_avail[i] := greatest(p_address_caps[i] - v_used, 0);
            end if;
        end if;
        if v_status[i] = 'over_limit' then
            v_order[i] := null;
        else
            v_counted[i] := true;
        end if;
    end loop;

    -- the orders, pending and not yet holding anything; a key that already
    -- has its order (or gets it from a transaction that commits first, or
    -- earlier in this batch) writes nothing
    insert into orders (id, token, checkout_key, customer_name, customer_email, currency,
                        amount_minor, provider, email_key, client_address)
    select x.order_id, x.token, x.key, x.name, x.email, x.currency, x.price * x.qty, x.provider,
           x.email_key, x.address
      from unnest(v_order, p_tokens, p_keys, p_names, p_emails, p_currencies, p_unit_prices,
                  p_qtys, p_providers, p_email_keys, p_addresses)
           with ordinality as x(order_id, token, key, name, email, currency, price, qty, provider,
                                email_key, address, n)
     where x.order_id is not null
     -- in key order, so two batches sharing keys wait on each other's
     -- orders in one direction only; a key repeated here is written once,
     -- for its first request
     order by x.key, x.n
    on conflict (checkout_key) do nothing;
    get diagnostics v_written = row_count;
    for i in 1 .. v_n loop
        if v_status[i] = 'over_limit' then
            continue;
        elsif v_written = v_n or exists (select 1 from orders o where o.id = v_order[i]) then
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


-- Staff login attempts are counted per e-mail from an address, per address
-- and per e-mail ("pair:<address> <email>", "address:<address>",
-- "email:<email>"): longer keys than one e-mail.
alter table login_throttle
    drop constraint throttle_key_shape,
    add constraint throttle_key_shape check (length(key) between 1 and 320);

-- While holds are pending, "sold out" is not final: what is left of a
-- resource now (plain holds past their TTL count as free, as in hf_status),
-- the units held by shoppers who are checking out or paying, and when the
-- first of those holds ends (a paying hold past its deadline waits for the
-- sweeper: it ends "now"). Unlike hf_status it never sums the live holds:
-- the counters say what is held, the due holds (few) are summed and the
-- first ends are the first entries of the due indexes, so a crowd at a
-- sold-out product with thousands of shoppers paying costs a few index
-- probes per request. (now(), not clock_timestamp(): only a stable time
-- can bound an index scan. PL/pgSQL, not SQL: its queries' plans are kept
-- per connection, where an inlined SQL function would be planned again on
-- every call of a parameterised query, which costs more than running it.)
create function hf_stock(p_resource text)
returns table (available_now integer, pending integer, first_ends_at timestamptz)
language plpgsql stable as $$
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
$$;
