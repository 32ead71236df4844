-- The drop queue (docs/waiting-list.md, "The drop queue"): a product with
-- a sale opening time takes a pre-queue before it opens. Turning the queue
-- on draws a random seed and publishes its SHA-256 (the commitment); the
-- product's free units are set aside for the queue from then on, so
-- nobody buys around it. At opening the confirmed entries are drawn:
-- each entry's rank is HMAC-SHA256(seed, entry id), ascending; the
-- entries take their places in line in that order (line numbers below
-- every later arrival's), the seed is published, and the units go to them
-- by the waiting list's handover, as far as they go. Arrivals after the
-- draw join at the back of the same line.

alter table products
    add column queue_seed       bytea,
    add column queue_commitment text,
    add column queue_drawn_at   timestamptz,
    add constraint product_queue_committed
        check ((queue_seed is null) = (queue_commitment is null)
               and (queue_seed is null or (length(queue_seed) = 32
                                           and queue_commitment ~ '^[0-9a-f]{64}$'
                                           and sale_opens_at is not null)))
        not valid,
    add constraint product_queue_drawn_after_commitment
        check (queue_drawn_at is null or queue_seed is not null) not valid;
alter table products validate constraint product_queue_committed;
alter table products validate constraint product_queue_drawn_after_commitment;

-- `queued`: confirmed for a drop queue that has not been drawn yet (no
-- place in line until the draw gives it one)
alter table waitlist_entries drop constraint waitlist_state_known;
alter table waitlist_entries add constraint waitlist_state_known
    check (state in ('unconfirmed', 'queued', 'waiting', 'offered', 'claimed', 'lapsed', 'removed'));
alter table waitlist_entries drop constraint waitlist_counted_when_confirmed;
alter table waitlist_entries add constraint waitlist_counted_when_confirmed
    check ((state not in ('waiting', 'offered', 'claimed', 'lapsed') or line_no is not null)
           and (state not in ('unconfirmed', 'queued') or line_no is null));
-- a drawn queue's places are numbered per product, below the sequence
alter table waitlist_entries drop constraint waitlist_entries_line_no_key;
create unique index waitlist_line_per_product on waitlist_entries (product_id, line_no);
drop index waitlist_one_per_email;
create unique index waitlist_one_per_email on waitlist_entries (product_id, email_key)
    where state in ('unconfirmed', 'queued', 'waiting', 'offered');
create index waitlist_queued on waitlist_entries (product_id) where state = 'queued';

-- The handover sets everything aside while a queue waits for its draw.
create or replace function hf_hand_over(p_resource text, p_now timestamptz) returns integer
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
    -- someone waits, or a product's drop queue has not opened yet (all its
    -- units wait for the queue's draw)
    v_waiting := exists (select 1 from waitlist_entries w
                           join products p on p.id = w.product_id
                          where p.resource_id = p_resource and w.state = 'waiting')
                 or exists (select 1 from products p
                             where p.resource_id = p_resource and p.queue_commitment is not null
                               and p.queue_drawn_at is null);
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
    if v_left > 0 and (exists (select 1 from waitlist_entries w
                                 join products p on p.id = w.product_id
                                where p.resource_id = p_resource and w.state = 'waiting')
                       or exists (select 1 from products p
                                   where p.resource_id = p_resource and p.queue_commitment is not null
                                     and p.queue_drawn_at is null)) then
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
