-- The waiting list's handover, corrected (docs/waiting-list.md):
--
-- * A line counts only the entries of products that can still be offered
--   units (on sale, not archived, the sale not closed). Before, an entry
--   of a product taken off sale kept the resource's free units set aside
--   for a line nobody could be served from, renewed every hour for ever.
-- * A product served strictly in order holds up its own entries only,
--   not those of another product on the same resource.
-- * An offer never takes an e-mail past the product's most per order: an
--   entry whose e-mail already holds units of the product in a pending
--   order keeps its place, and the next entry is served.
-- * An entry remembers the client address it was made from, and its
--   offer's order carries it, so the per-address cap counts offers as it
--   counts checkouts; a join counts the address's live entries of the
--   product against the same cap (src/waitlist.rs).
-- * Units only set aside for the line do not stop staff lowering the
--   capacity: they are counted back in, the new total set, and what is
--   left set aside again, in the same transaction.

alter table waitlist_entries
    add column client_address text,
    add constraint waitlist_client_address_shape check (length(client_address) <= 64);
create index waitlist_live_by_address on waitlist_entries (product_id, client_address)
    where state in ('unconfirmed', 'queued', 'waiting', 'offered') and client_address is not null;

-- Whether anyone can be served from a resource's line: a waiting entry of
-- a product on sale, or a product's drop queue not drawn yet (all of its
-- units wait for the draw).
create function hf_line_waits(p_resource text, p_now timestamptz) returns boolean
language sql stable as $$
    select exists (select 1 from waitlist_entries w
                     join products p on p.id = w.product_id
                    where p.resource_id = p_resource and w.state = 'waiting'
                      and p.active and p.archived_at is null
                      and (p.sale_closes_at is null or p.sale_closes_at > p_now))
        or exists (select 1 from products p
                    where p.resource_id = p_resource and p.queue_commitment is not null
                      and p.queue_drawn_at is null and p.active and p.archived_at is null);
$$;

-- What was set aside for a resource's line counts as free again (the
-- caller holds the resource's lock). The units released.
create function hf_release_aside(p_resource text, p_now timestamptz) returns integer
language plpgsql as $$
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
$$;

create or replace function hf_hand_over(p_resource text, p_now timestamptz) returns integer
language plpgsql as $$
declare
    r         resources;
    e         record;
    v_left    integer;
    v_hold    uuid;
    v_order   uuid;
    v_until   timestamptz;
    v_offered integer := 0;
    v_waiting boolean;
    -- products served strictly in order whose first entry did not fit
    v_blocked text[] := '{}';
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
    for e in
        select w.id, w.qty, w.name, w.email, w.email_key, w.provider, w.token, w.client_address,
               p.id as product_id, p.name as product_name, p.price_minor, p.currency,
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
        if e.qty > v_left then
            -- strictly in order: nobody behind this group, of its product,
            -- is served before it
            if e.waitlist_in_order then
                v_blocked := v_blocked || e.product_id;
            end if;
            continue;
        end if;
        -- the e-mail holds units of the product in a pending order already:
        -- the offer would take it past the most per order; it keeps its place
        continue when hf_units_held_by_email(e.email_key, e.product_id) + e.qty > e.max_per_order;
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
                            amount_minor, provider, email_key, client_address, hold_id)
        values (v_order, replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', ''),
                'waitlist-' || e.id, e.name, e.email, e.currency, e.price_minor * e.qty,
                e.provider, e.email_key, e.client_address, v_hold);
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
    if v_left > 0 and hf_line_waits(p_resource, p_now) then
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

-- Capacity changed: units only set aside for the line are counted back in
-- before the new total is compared with what is held and sold, and the
-- line is served again after (new units go to the waiting list first).
create or replace function hf_upsert_resource(p_id text, p_total integer)
returns table(status text, resource_id text, total integer, held integer, sold integer, available integer)
language plpgsql as $$
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
$$;
