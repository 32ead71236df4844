-- Holdfast inventory: the operations.
--
-- Every operation is one function call: one round trip, one transaction.
-- Rules every function here keeps:
--   * READ COMMITTED. The only locks are row locks on `resources`, taken
--     FOR NO KEY UPDATE, in ascending id order, before any hold is read for a
--     decision. Holds of a resource change only under that resource's lock,
--     so the lock serialises everything that can move its counters.
--   * Functions that start from a hold id read the hold's resources
--     unlocked (lines never move between resources), lock them in order,
--     and only then read the hold's state.
--   * Time is read once, after the locks are held (clock_timestamp(), not the
--     transaction start, which can be older than a long lock wait).
--   * A global account cap adds one transaction-scoped advisory lock per
--     account, always taken after every resource lock and never followed by
--     one, so it cannot close a cycle.
--   * Business results are returned as a status; only bad input raises
--     (SQLSTATE 22023, invalid_parameter_value) and then nothing changes.
--   * A plain hold past its TTL counts as free: whoever needs the capacity
--     may expire it (lazily). A hold in the payment phase is expired only by
--     the sweeper, only after its deadline.

-- What hold-level operations return. For a basket, hold_id is the basket's
-- id, qty the sum of its lines and resource_id is null.
create type hold_result as (
    status               text,
    hold_id              uuid,
    resource_id          text,
    account_id           text,
    qty                  integer,
    state                text,
    expires_at           timestamptz,
    payment_deadline     timestamptz,
    payment_ref          text,
    existing_payment_ref text,
    other_hold_id        uuid,
    available            integer,
    extensions           integer
);

-- One row per line of a basket hold.
create type basket_line_result as (
    status      text,     -- the basket's outcome, the same on every line
    basket_id   uuid,
    resource_id text,
    qty         integer,  -- requested (duplicate lines are summed)
    line_status text,     -- held | ok | short | unknown | over_cap
    hold_id     uuid,
    available   integer,
    expires_at  timestamptz
);

create function hf_bad_input(p_message text) returns void
language plpgsql as $$
begin
    raise exception '%', p_message using errcode = 'invalid_parameter_value';
end;
$$;

create function hf_hold_row(p_status text, h holds, p_available integer) returns hold_result
language sql immutable as $$
    select p_status, h.id, h.resource_id, h.account_id, h.qty, h.state, h.expires_at,
           h.payment_deadline, h.payment_ref, null::text, null::uuid, p_available, h.extensions;
$$;

-- Summary of a purchase (a single hold or a basket) for the hold-id operations.
create function hf_purchase_row(p_status text, p_purchase uuid, p_payment_ref text,
                                p_existing_ref text, p_other uuid) returns hold_result
language sql stable as $$
    select p_status, p_purchase,
           case when count(distinct h.resource_id) = 1 then min(h.resource_id) end,
           min(h.account_id), sum(h.qty)::integer,
           case when count(distinct h.state) = 1 then min(h.state) else 'mixed' end,
           min(h.expires_at), min(h.payment_deadline),
           coalesce(p_payment_ref, max(h.payment_ref)), p_existing_ref, p_other,
           null::integer, max(h.extensions)
      from holds h
     where h.purchase_id = p_purchase;
$$;

-- Expire the plain holds of one resource whose TTL has passed. The caller
-- holds the resource's lock. Returns how many holds and units came back, and
-- puts next_expiry back to the exact earliest remaining expiry.
create function hf_expire_due_plain(p_resource text, p_now timestamptz, p_actor text, p_limit integer,
                                    out expired_holds integer, out expired_qty integer)
language plpgsql as $$
begin
    with due as (
        select id from holds
         where resource_id = p_resource and state = 'held' and expires_at <= p_now
         order by expires_at
         limit p_limit
    ), done as (
        update holds h
           set state = 'expired', ended_at = p_now, ended_by = p_actor, end_reason = 'ttl'
          from due
         where h.id = due.id
        returning h.id, h.qty
    ), logged as (
        insert into hold_events (hold_id, kind, from_state, to_state, actor, detail)
        select id, 'expired', 'held', 'expired', p_actor, '{"reason": "ttl"}'::jsonb from done
    )
    select count(*)::integer, coalesce(sum(qty), 0)::integer into expired_holds, expired_qty from done;

    update resources
       set held = held - expired_qty,
           next_expiry = (select min(expires_at) from holds
                           where resource_id = p_resource and state = 'held'),
           updated_at = p_now
     where id = p_resource;
end;
$$;

-- Expire the paying holds of one resource whose payment deadline has passed.
-- Only the sweeper calls this.
create function hf_expire_due_paying(p_resource text, p_now timestamptz, p_actor text, p_limit integer,
                                     out expired_holds integer, out expired_qty integer)
language plpgsql as $$
begin
    with due as (
        select id from holds
         where resource_id = p_resource and state = 'awaiting_payment' and payment_deadline <= p_now
         order by payment_deadline
         limit p_limit
    ), done as (
        update holds h
           set state = 'expired', ended_at = p_now, ended_by = p_actor, end_reason = 'payment_deadline'
          from due
         where h.id = due.id
        returning h.id, h.qty
    ), logged as (
        insert into hold_events (hold_id, kind, from_state, to_state, actor, detail)
        select id, 'expired', 'awaiting_payment', 'expired', p_actor,
               '{"reason": "payment_deadline"}'::jsonb from done
    )
    select count(*)::integer, coalesce(sum(qty), 0)::integer into expired_holds, expired_qty from done;

    update resources
       set held = held - expired_qty,
           next_deadline = (select min(payment_deadline) from holds
                             where resource_id = p_resource and state = 'awaiting_payment'),
           updated_at = p_now
     where id = p_resource;
end;
$$;

-- Find the purchase a hold id or basket id belongs to, and lock its
-- resources in id order. Returns null when there is no such hold.
create function hf_lock_purchase(p_id uuid) returns uuid
language plpgsql as $$
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
$$;

-- End every live line of a purchase (released or expired), give the units
-- back and write the history. The caller holds the resource locks.
create function hf_end_purchase(p_purchase uuid, p_state text, p_now timestamptz,
                                p_actor text, p_reason text) returns integer
language plpgsql as $$
declare
    v_lines integer;
begin
    with live as (
        select id, state as old_state from holds
         where purchase_id = p_purchase and state in ('held', 'awaiting_payment')
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
    select count(*)::integer into v_lines from done;
    return v_lines;
end;
$$;

-- What a purchase looks like now, read under its locks.
create type purchase_shape as (
    lines     integer,
    confirmed integer,
    released  integer,
    expired   integer,
    paying    integer,
    plain     integer,
    plain_due integer,
    paying_due integer,
    max_extensions_used integer
);

create function hf_purchase_shape(p_purchase uuid, p_now timestamptz) returns purchase_shape
language sql stable as $$
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
$$;

-- If a purchase has ended (a line released or expired, or a plain line past
-- its TTL), end what is left of it the same way and say how it ended.
-- Returns null when the purchase is still live.
create function hf_settle_ended(p_purchase uuid, p_shape purchase_shape, p_now timestamptz) returns text
language plpgsql as $$
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
$$;

-------------------------------------------------------------------------------
-- upsert_resource → created | updated | capacity_below_committed
-------------------------------------------------------------------------------
create function hf_upsert_resource(p_id text, p_total integer)
returns table (status text, resource_id text, total integer, held integer, sold integer, available integer)
language plpgsql as $$
declare
    r resources;
    v_now timestamptz;
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
        return query select 'capacity_below_committed', r.id, r.total, r.held, r.sold, r.total - r.held - r.sold;
        return;
    end if;
    update resources x set total = p_total, updated_at = v_now where x.id = p_id returning x.* into r;
    return query select 'updated', r.id, r.total, r.held, r.sold, r.total - r.held - r.sold;
end;
$$;

-------------------------------------------------------------------------------
-- hold → held | replayed | insufficient | account_cap | unknown_resource
-------------------------------------------------------------------------------
create function hf_hold(p_resource text, p_qty integer, p_account text,
                        p_key text default null, p_ttl interval default null)
returns hold_result
language plpgsql as $$
declare
    s inventory_settings;
    r resources;
    h holds;
    v_now timestamptz;
    v_ttl interval;
    v_available integer;
    v_mine integer;
    res hold_result;
begin
    if p_qty is null or p_qty <= 0 then
        perform hf_bad_input(format('qty must be a positive number of units, got %s', coalesce(p_qty::text, 'null')));
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

    -- A refusal may be decided without the lock; a grant never is. The
    -- unlocked read sees the latest committed counters, so a refusal here is
    -- what the locked path would have answered at that moment, and a sold-out
    -- resource answers its crowd without queueing it on the row lock. When
    -- something is due to expire, the locked path decides (it may free units).
    select * into r from resources where id = p_resource;
    if not found then
        res.status := 'unknown_resource';
        res.resource_id := p_resource;
        return res;
    end if;
    if r.total - r.held - r.sold < p_qty and coalesce(r.next_expiry > clock_timestamp(), true) then
        if p_key is not null then
            select * into h from holds
             where resource_id = p_resource and account_id = p_account and idempotency_key = p_key;
            if found then
                return hf_hold_row('replayed', h, r.total - r.held - r.sold);
            end if;
        end if;
        res.status := 'insufficient';
        res.resource_id := p_resource;
        res.account_id := p_account;
        res.qty := p_qty;
        res.available := r.total - r.held - r.sold;
        return res;
    end if;

    -- lock: this resource
    select * into r from resources where id = p_resource for no key update;
    v_now := clock_timestamp();

    if p_key is not null then
        select * into h from holds
         where resource_id = p_resource and account_id = p_account and idempotency_key = p_key;
        if found then
            return hf_hold_row('replayed', h, r.total - r.held - r.sold);
        end if;
    end if;

    v_available := r.total - r.held - r.sold;
    -- Expired holds count as free, but finding them costs a scan, so only
    -- look when the counters say no and the hint says something is due.
    if v_available < p_qty and r.next_expiry <= v_now then
        perform hf_expire_due_plain(p_resource, v_now, 'lazy-expiry', null);
        select * into r from resources where id = p_resource;
        v_available := r.total - r.held - r.sold;
    end if;

    -- not enough comes before the account cap, as on the unlocked path
    if v_available < p_qty then
        res.status := 'insufficient';
        res.resource_id := p_resource;
        res.account_id := p_account;
        res.qty := p_qty;
        res.available := v_available;
        return res;
    end if;

    if s.account_cap is not null then
        if s.cap_scope = 'global' then
            -- lock: this account, after the resource lock
            perform pg_advisory_xact_lock(hashtextextended('holdfast.account:' || p_account, 0));
        end if;
        select coalesce(sum(qty), 0) into v_mine from holds
         where account_id = p_account
           and (s.cap_scope = 'global' or resource_id = p_resource)
           and (state = 'awaiting_payment' or (state = 'held' and expires_at > v_now));
        if v_mine + p_qty > s.account_cap then
            res.status := 'account_cap';
            res.resource_id := p_resource;
            res.account_id := p_account;
            res.qty := p_qty;
            res.available := greatest(s.account_cap - v_mine, 0);
            return res;
        end if;
    end if;

    insert into holds (resource_id, account_id, qty, idempotency_key, expires_at)
    values (p_resource, p_account, p_qty, p_key, v_now + v_ttl)
    returning * into h;
    insert into hold_events (hold_id, kind, to_state, actor, detail)
    values (h.id, 'held', 'held', p_account, jsonb_build_object('qty', p_qty, 'ttl_seconds', extract(epoch from v_ttl)));
    update resources
       set held = held + p_qty,
           next_expiry = least(next_expiry, h.expires_at),
           updated_at = v_now
     where id = p_resource;
    return hf_hold_row('held', h, v_available - p_qty);
end;
$$;

-------------------------------------------------------------------------------
-- basket hold: several resources, all or nothing
--   → held | replayed | insufficient | account_cap | unknown_resource
-------------------------------------------------------------------------------
create function hf_hold_basket(p_resources text[], p_qtys integer[], p_account text,
                               p_key text default null, p_ttl interval default null)
returns setof basket_line_result
language plpgsql as $$
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
$$;

-------------------------------------------------------------------------------
-- begin_payment → awaiting_payment | replayed | expired | confirmed | released | not_found
-------------------------------------------------------------------------------
create function hf_begin_payment(p_id uuid, p_window interval default null, p_actor text default 'checkout')
returns hold_result
language plpgsql as $$
declare
    s inventory_settings;
    v_window interval;
    v_purchase uuid;
    v_now timestamptz;
    v_shape purchase_shape;
    v_ended text;
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
    v_shape := hf_purchase_shape(v_purchase, v_now);

    if v_shape.confirmed > 0 then
        return hf_purchase_row('confirmed', v_purchase, null, null, null);
    end if;
    v_ended := hf_settle_ended(v_purchase, v_shape, v_now);
    if v_ended is not null then
        return hf_purchase_row(v_ended, v_purchase, null, null, null);
    end if;
    if v_shape.plain = 0 then
        -- every line is already paying: a retry
        return hf_purchase_row('replayed', v_purchase, null, null, null);
    end if;

    with moved as (
        update holds
           set state = 'awaiting_payment', payment_started_at = v_now, payment_deadline = v_now + v_window
         where purchase_id = v_purchase and state = 'held'
        returning id, resource_id, payment_deadline
    ), logged as (
        insert into hold_events (hold_id, kind, from_state, to_state, actor, detail)
        select id, 'payment_started', 'held', 'awaiting_payment', p_actor,
               jsonb_build_object('payment_deadline', payment_deadline)
          from moved
    )
    update resources x
       set next_deadline = least(x.next_deadline, m.deadline), updated_at = v_now
      from (select resource_id, min(payment_deadline) as deadline from moved group by resource_id) m
     where x.id = m.resource_id;

    return hf_purchase_row('awaiting_payment', v_purchase, null, null, null);
end;
$$;

-------------------------------------------------------------------------------
-- confirm → confirmed | already_confirmed | duplicate_payment | payment_ref_in_use
--           | expired | released | not_found
-------------------------------------------------------------------------------
create function hf_confirm(p_id uuid, p_payment_ref text, p_actor text default 'payment')
returns hold_result
language plpgsql as $$
declare
    v_purchase uuid;
    v_now timestamptz;
    v_shape purchase_shape;
    v_ended text;
    v_existing text;
    v_other uuid;
    v_moved integer;
    res hold_result;
begin
    if p_payment_ref is null or length(p_payment_ref) not between 1 and 255 then
        perform hf_bad_input('payment reference must be 1 to 255 characters');
    end if;

    v_purchase := hf_lock_purchase(p_id);
    if v_purchase is null then
        res.status := 'not_found';
        res.hold_id := p_id;
        res.payment_ref := p_payment_ref;
        return res;
    end if;
    v_now := clock_timestamp();

    -- Claim the payment reference before anything else: a payment that
    -- bought (or was refused for) another purchase is never answered with
    -- an outcome that would refund it or sell with it here. A concurrent
    -- claim of the same reference waits for that transaction, then loses.
    -- Refused payments keep their claim, so money that is being refunded
    -- can never buy anything later.
    insert into payment_refs (payment_ref, purchase_id) values (p_payment_ref, v_purchase)
    on conflict (payment_ref) do nothing;
    if not found then
        select purchase_id into v_other from payment_refs where payment_ref = p_payment_ref;
        if v_other is distinct from v_purchase then
            return hf_purchase_row('payment_ref_in_use', v_purchase, p_payment_ref, null, v_other);
        end if;
    end if;

    v_shape := hf_purchase_shape(v_purchase, v_now);
    if v_shape.confirmed > 0 then
        select payment_ref into v_existing from holds
         where purchase_id = v_purchase and state = 'confirmed' limit 1;
        if v_existing = p_payment_ref then
            return hf_purchase_row('already_confirmed', v_purchase, p_payment_ref, null, null);
        end if;
        return hf_purchase_row('duplicate_payment', v_purchase, p_payment_ref, v_existing, null);
    end if;

    -- A released or expired purchase is never revived: the money goes back.
    v_ended := hf_settle_ended(v_purchase, v_shape, v_now);
    if v_ended is not null then
        return hf_purchase_row(v_ended, v_purchase, p_payment_ref, null, null);
    end if;

    with sold as (
        update holds
           set state = 'confirmed', payment_ref = p_payment_ref, confirmed_at = v_now
         where purchase_id = v_purchase and state in ('held', 'awaiting_payment')
        returning id, resource_id, qty, (payment_started_at is not null) as was_paying
    ), logged as (
        insert into hold_events (hold_id, kind, from_state, to_state, actor, detail)
        select id, 'confirmed', case when was_paying then 'awaiting_payment' else 'held' end,
               'confirmed', p_actor, jsonb_build_object('payment_ref', p_payment_ref)
          from sold
    )
    update resources x
       set held = x.held - m.qty, sold = x.sold + m.qty, updated_at = v_now
      from (select resource_id, sum(qty)::integer as qty from sold group by resource_id) m
     where x.id = m.resource_id;
    -- every line of a live purchase moved, or something is badly wrong
    get diagnostics v_moved = row_count;
    if v_moved = 0 then
        raise exception 'confirm of purchase % moved no counters', v_purchase;
    end if;

    return hf_purchase_row('confirmed', v_purchase, p_payment_ref, null, null);
end;
$$;

-------------------------------------------------------------------------------
-- release → released | already_released | confirmed | expired | not_found
-------------------------------------------------------------------------------
create function hf_release(p_id uuid, p_reason text default 'released', p_actor text default 'shopper')
returns hold_result
language plpgsql as $$
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
$$;

-------------------------------------------------------------------------------
-- extend (bounded) → extended | not_extendable | not_found
-------------------------------------------------------------------------------
create function hf_extend(p_id uuid, p_by interval default null, p_actor text default 'shopper')
returns hold_result
language plpgsql as $$
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
$$;

-------------------------------------------------------------------------------
-- sweep: expire what is due, resource by resource
-------------------------------------------------------------------------------

-- Resources that may have something due (the hints are never late).
create function hf_due_resources() returns setof text
language sql stable as $$
    select id from resources
     where least(next_expiry, next_deadline) <= clock_timestamp()
     order by id;
$$;

-- Expire at most p_limit due holds of one resource. Two sweepers may call
-- this at once: the second waits for the first's lock and then finds
-- nothing left, so every hold is expired exactly once.
create function hf_sweep_resource(p_resource text, p_limit integer default 1000, p_actor text default 'sweeper')
returns table (resource_id text, expired_holds integer, expired_qty integer)
language plpgsql as $$
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
$$;

-- The whole sweep in one call, for pg_cron or psql. Holdfast's own worker
-- calls hf_sweep_resource per resource so that each lock is held briefly.
create function hf_sweep(p_limit integer default 1000, p_actor text default 'sweeper')
returns table (resource_id text, expired_holds integer, expired_qty integer)
language plpgsql as $$
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
$$;

-------------------------------------------------------------------------------
-- check, repair, status
-------------------------------------------------------------------------------

-- Counters versus rows. One statement, so one snapshot: counters and the
-- rows they count are always seen together.
create function hf_check(p_resource text default null)
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
                   sum(h.qty) filter (where h.state = 'confirmed') as sold
              from holds h
             where p_resource is null or h.resource_id = p_resource
             group by h.resource_id
      ) x on x.resource_id = r.id
     where p_resource is null or r.id = p_resource
     order by r.id;
$$;

-- Recompute one resource's counters and hints from its rows.
create function hf_repair(p_resource text)
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
           coalesce(sum(qty) filter (where state = 'confirmed'), 0)
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

-- What a shop shows: plain holds past their TTL already count as free.
create function hf_status(p_resource text)
returns table (resource_id text, total integer, held integer, sold integer, available integer,
               held_plain integer, held_paying integer, due integer, available_now integer)
language sql stable as $$
    select r.id, r.total, r.held, r.sold, r.total - r.held - r.sold,
           p.held_plain, q.held_paying, p.due, r.total - r.held - r.sold + p.due
      from resources r,
           lateral (select coalesce(sum(h.qty), 0)::integer as held_plain,
                           coalesce(sum(h.qty) filter (where h.expires_at <= clock_timestamp()), 0)::integer as due
                      from holds h where h.resource_id = r.id and h.state = 'held') p,
           lateral (select coalesce(sum(h.qty), 0)::integer as held_paying
                      from holds h where h.resource_id = r.id and h.state = 'awaiting_payment') q
     where r.id = p_resource;
$$;
