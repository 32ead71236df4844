-- The waiting list (docs/waiting-list.md): a sold-out product takes
-- entries (an e-mail, how many), each counted once its e-mail confirmed
-- it. Units that come free (a hold ended, a refund put back on sale,
-- capacity raised) are held for the first waiting entry they fit by the
-- transaction that frees them: hf_hand_over, called from hf_end_holds,
-- hf_return and hf_upsert_resource. The offer is an order like any other,
-- pending with its hold, which lives for the product's claim window; the
-- shopper's link opens its payment page. An offer not claimed in time
-- expires as any hold does, and the transaction that expires it offers
-- the units to the next entry.

alter table products
    add column waitlist_claim_minutes integer not null default 15,
    -- true: a group that does not fit holds up the entries behind it;
    -- false (the default): the next entry that fits is served
    add column waitlist_in_order boolean not null default false,
    add constraint product_claim_window check (waitlist_claim_minutes between 1 and 1440);

create sequence waitlist_line;

create table waitlist_entries (
    id               uuid primary key default gen_random_uuid(),
    product_id       text not null references products (id),
    -- the entry's page and its links: 256 random bits, as an order's token
    token            text not null unique,
    name             text not null,
    email            text not null,
    email_key        text not null,
    qty              integer not null,
    -- the way of paying the offer's order takes (the shop's default when
    -- the entry was made)
    provider         text not null,
    state            text not null default 'unconfirmed',
    -- the place in line: taken when the e-mail confirmed the entry
    line_no          bigint unique,
    created_at       timestamptz not null default now(),
    confirmed_at     timestamptz,
    offered_at       timestamptz,
    offer_expires_at timestamptz,
    order_id         uuid references orders (id),
    ended_at         timestamptz,
    ended_by         text,

    constraint waitlist_state_known
        check (state in ('unconfirmed', 'waiting', 'offered', 'claimed', 'lapsed', 'removed')),
    constraint waitlist_qty check (qty between 1 and 100),
    constraint waitlist_customer_shape
        check (length(name) between 1 and 200 and length(email) between 3 and 254
               and length(email_key) between 3 and 254),
    constraint waitlist_token_shape check (token ~ '^[0-9a-f]{64}$'),
    constraint waitlist_counted_when_confirmed
        check ((state = 'unconfirmed') = (line_no is null)),
    constraint waitlist_offer_has_order
        check (state not in ('offered', 'claimed') or (order_id is not null and offered_at is not null)),
    constraint waitlist_ended_says_who
        check ((state in ('lapsed', 'removed')) = (ended_at is not null and ended_by is not null))
);
-- one live entry per normalised e-mail per product
create unique index waitlist_one_per_email on waitlist_entries (product_id, email_key)
    where state in ('unconfirmed', 'waiting', 'offered');
create index waitlist_in_line on waitlist_entries (product_id, line_no) where state = 'waiting';
create index waitlist_by_product on waitlist_entries (product_id, created_at);

do $$
declare
    v_def text;
begin
    select pg_get_constraintdef(oid) into v_def
      from pg_constraint where conname = 'job_kind_known' and conrelid = 'outbox_jobs'::regclass;
    execute 'alter table outbox_jobs drop constraint job_kind_known';
    execute 'alter table outbox_jobs add constraint job_kind_known '
            || replace(v_def, 'ARRAY[', 'ARRAY[''waitlist_mail''::text, ');

    select pg_get_constraintdef(oid) into v_def
      from pg_constraint where conname = 'staff_action_known' and conrelid = 'staff_actions'::regclass;
    execute 'alter table staff_actions drop constraint staff_action_known';
    execute 'alter table staff_actions add constraint staff_action_known '
            || replace(v_def, 'ARRAY[', 'ARRAY[''remove_waitlist_entry''::text, ');
end;
$$;

-- Units free on a resource go to the waiting entries of its products, in
-- line order: each that fits gets a hold for its product's claim window
-- and a pending order for it, and is told by mail (and webhook). An entry
-- that does not fit waits, and the next that fits is served, unless its
-- product says a group holds up those behind it. Units that fit nobody
-- yet are set aside for the line (one hold of the resource's, account
-- `waitlist-line`), so the crowd does not take what people in line are
-- waiting for; they are counted back in at the next handover, and go
-- back on sale once nobody waits. Called in the transaction that freed
-- the units, with the resource locked by it (or locked here), so nobody
-- else can take them in between. Returns how many entries were offered
-- units.
create function hf_hand_over(p_resource text, p_now timestamptz) returns integer
language plpgsql as $$
declare
    r         resources;
    e         record;
    v_left    integer;
    v_hold    uuid;
    v_order   uuid;
    v_until   timestamptz;
    v_aside   holds;
    v_offered integer := 0;
    v_waiting boolean;
begin
    v_waiting := exists (select 1 from waitlist_entries w
                           join products p on p.id = w.product_id
                          where p.resource_id = p_resource and w.state = 'waiting');
    -- nobody waiting and nothing set aside: nothing to do, no lock taken
    if not v_waiting and not exists (select 1 from holds
                                      where account_id = 'waitlist-line'
                                        and resource_id = p_resource
                                        and state in ('held', 'awaiting_payment')) then
        return 0;
    end if;
    -- lock: this resource
    select * into r from resources where id = p_resource for no key update;
    -- what was set aside counts as free again
    select * into v_aside from holds
     where account_id = 'waitlist-line' and resource_id = p_resource and state = 'held'
     for update;
    if found then
        update holds set state = 'released', ended_at = p_now, ended_by = 'waitlist',
                         end_reason = 'waitlist_regrouped'
         where id = v_aside.id;
        insert into hold_events (hold_id, kind, from_state, to_state, actor, detail)
        values (v_aside.id, 'released', 'held', 'released', 'waitlist',
                jsonb_build_object('reason', 'waitlist_regrouped'));
        update resources set held = held - v_aside.qty, updated_at = p_now
         where id = p_resource returning * into r;
    end if;
    v_left := r.total - r.held - r.sold;
    if v_left <= 0 or not v_waiting then
        return 0;
    end if;
    for e in
        select w.id, w.qty, w.name, w.email, w.email_key, w.provider, w.token,
               p.id as product_id, p.name as product_name, p.price_minor, p.currency,
               p.waitlist_claim_minutes, p.waitlist_in_order
          from waitlist_entries w
          join products p on p.id = w.product_id
         where p.resource_id = p_resource and w.state = 'waiting'
           and p.active and p.archived_at is null
           and (p.sale_closes_at is null or p.sale_closes_at > p_now)
         order by w.line_no
           for update of w
    loop
        exit when v_left <= 0;
        if e.qty > v_left then
            exit when e.waitlist_in_order;
            continue;
        end if;
        v_hold := hf_uuid_v7();
        v_order := gen_random_uuid();
        v_until := p_now + make_interval(mins => e.waitlist_claim_minutes);
        insert into holds (id, resource_id, account_id, qty, expires_at)
        values (v_hold, p_resource, 'waitlist:' || e.id, e.qty, v_until);
        insert into hold_events (hold_id, kind, to_state, actor, detail)
        values (v_hold, 'held', 'held', 'waitlist',
                jsonb_build_object('qty', e.qty, 'entry', e.id,
                                   'ttl_seconds', e.waitlist_claim_minutes * 60));
        update resources
           set held = held + e.qty, next_expiry = least(next_expiry, v_until), updated_at = p_now
         where id = p_resource;
        insert into orders (id, token, checkout_key, customer_name, customer_email, currency,
                            amount_minor, provider, email_key, hold_id)
        values (v_order, replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', ''),
                'waitlist-' || e.id, e.name, e.email, e.currency, e.price_minor * e.qty,
                e.provider, e.email_key, v_hold);
        insert into order_lines (order_id, product_id, name, qty, unit_price_minor)
        values (v_order, e.product_id, e.product_name, e.qty, e.price_minor);
        update waitlist_entries
           set state = 'offered', offered_at = p_now, offer_expires_at = v_until, order_id = v_order
         where id = e.id;
        insert into outbox_jobs (kind, dedupe_key, payload)
        values ('waitlist_mail', 'waitlist_offer:' || e.id,
                jsonb_build_object('entry_id', e.id, 'what', 'offer'))
        on conflict (dedupe_key) do nothing;
        perform hf_webhook_event('waitlist.offered',
                                 jsonb_build_object('entry_id', e.id, 'product_id', e.product_id,
                                                    'qty', e.qty, 'claim_until', v_until,
                                                    'order', hf_webhook_order(v_order)));
        v_left := v_left - e.qty;
        v_offered := v_offered + 1;
    end loop;
    -- what fits nobody in line yet waits for them, looked at again within
    -- the hour (its expiry hands over again) and at every change
    if v_left > 0 and exists (select 1 from waitlist_entries w
                                join products p on p.id = w.product_id
                               where p.resource_id = p_resource and w.state = 'waiting') then
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
    end if;
    return v_offered;
end;
$$;

-- Ending holds (expiry, release, a basket line gone) gives their units
-- back and, in the same transaction, on to the waiting list. An offer's
-- hold that ended unclaimed lapses its entry.
create or replace function hf_end_holds(p_ids uuid[], p_state text, p_now timestamptz,
                                        p_actor text, p_reason text,
                                        out ended_holds integer, out ended_qty integer)
language plpgsql as $$
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
$$;

-- An offer's order paid: its entry was served.
create function hf_waitlist_claimed() returns trigger
language plpgsql as $$
begin
    update waitlist_entries set state = 'claimed'
     where order_id = new.id and state in ('offered', 'lapsed');
    return null;
end;
$$;
create trigger orders_waitlist_claimed
    after update of state on orders
    for each row when (old.state = 'pending' and new.state = 'paid' and new.checkout_key like 'waitlist-%')
    execute function hf_waitlist_claimed();
create index waitlist_by_order on waitlist_entries (order_id) where order_id is not null;

-- Units given back by a refund and put back on sale go to the waiting list.
create or replace function hf_return(p_hold uuid, p_qty integer, p_restock boolean, p_actor text, p_reason text)
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
    if p_restock then
        perform hf_hand_over(h.resource_id, clock_timestamp());
    end if;
end;
$$;

-- Capacity raised: the new units go to the waiting list first.
create or replace function hf_upsert_resource(p_id text, p_total integer)
returns table(status text, resource_id text, total integer, held integer, sold integer, available integer)
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
    if p_total > r.held + r.sold then
        perform hf_hand_over(p_id, v_now);
        select * into r from resources x where x.id = p_id;
    end if;
    return query select 'updated', r.id, r.total, r.held, r.sold, r.total - r.held - r.sold;
end;
$$;
