-- The waiting list's handover, once (issue 44): 0160 gave a table time a
-- handover of its own (hf_hand_over_tables) that wrote an offer exactly
-- as hf_hand_over (0180) did. Now one function chooses who is offered
-- what, with a table time's step as a branch decided by the resource's
-- data (it has dining times), and one writes an offer (hf_offer), so an
-- offer is made the same way for every kind. What each is offered is
-- unchanged: a seated section's entry the best seats together; a table
-- time's entry a table free at its time for its party, at its deposit,
-- claimed before the time; an entry that cannot be served keeps its
-- place (served strictly in order, it stops its product's line, except
-- a table time's, whose parties wait for tables of their size); what
-- fits nobody yet is set aside for the line, except a table time's
-- covers, which never wait without a table.

-- One offer to a waiting-list entry, whose row and resource the caller
-- has locked: a hold of its units until `p_until` and its pending order
-- at `p_unit_minor` a unit, placed (the seats chosen for it pinned and
-- named on its line; a table time's party seated as a checkout is, by
-- hf_seat_party, which seats nothing for any other product), then the
-- entry offered, its mail queued and its webhook written. Returns the
-- offer's order.
create function hf_offer(p_resource text, p_entry uuid, p_unit_minor bigint,
                         p_until timestamptz, p_now timestamptz, p_seats bigint[])
returns uuid
language plpgsql as $$
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
$$;

-- Units that came free go to the resource's waiting list, in line order,
-- in the transaction that freed them (0180's, with 0160's table times).
create or replace function hf_hand_over(p_resource text, p_now timestamptz)
returns integer
language plpgsql as $$
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
$$;

drop function hf_hand_over_tables(text, timestamptz);
