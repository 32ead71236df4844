-- A table for a party at a time (docs/design.md, "Tables: a party at a
-- time"; issue 36).
--
-- A dining room is a collection of kind `dining_room` with its tables,
-- the sets of tables that may be joined, its service periods (each with
-- its cancellation policy), its turn times by party size and its pacing.
-- Each bookable time is a product of kind `table` (a row of
-- `dining_times`), whose resource is the quarter hour's pacing counter: a
-- booking for 4 holds 4 of its units, so everything that reads counters
-- reads bookings too. Beside the hold, in the checkout's one transaction,
-- `hf_seat_party` pins the smallest free table (or joined set) that fits
-- for `[start, start + turn)`; an exclusion constraint refuses two live
-- pins on one table that overlap, whatever code writes them. A pin lives
-- and ends with its hold.

-- btree_gist lets one gist index compare the room and the table by
-- equality beside the time range by overlap. Debian's postgresql-15
-- package ships it; since PostgreSQL 13 it is a trusted extension, which
-- the owner of a database may create without being a superuser.
create extension if not exists btree_gist;

-- A guest's phone, asked by the booking form (the host stand calls it).
alter table orders
    add column customer_phone text,
    add constraint order_phone_shape check (customer_phone ~ '^\+?[0-9][0-9 ()./-]{4,29}$');

create table dining_rooms (
    collection          text primary key references collections (id),
    -- what a time sells ("Dinner at the Harbour Bistro"); each time is
    -- named "<name>, <when>"
    name                text not null,
    description         text not null default '',
    currency            text not null,
    -- minutes between bookable times
    interval_minutes    integer not null default 15,
    -- covers that may start in any quarter hour: the total of each time's
    -- pacing resource
    pacing              integer not null,
    -- times are published for today and this many days ahead
    days_ahead          integer not null default 30,
    -- how late one may book: a time's sale closes this many minutes
    -- before it
    book_until_minutes  integer not null default 60,
    largest_party       integer not null default 10,
    closed_days         date[] not null default '{}',
    -- how a table is chosen: the smallest that fits (the shop's), or the
    -- first free one in the room's order (the baseline the tables bench
    -- compares with)
    chooser             text not null default 'smallest',
    archived_at         timestamptz,
    updated_at          timestamptz not null default now(),
    constraint dining_room_name_shape check (length(name) between 1 and 200 and length(description) <= 2000),
    constraint dining_room_currency check (currency ~ '^[a-z]{3}$'),
    constraint dining_room_interval check (interval_minutes in (15, 30, 45, 60)),
    constraint dining_room_pacing check (pacing between 1 and 10000),
    constraint dining_room_days_ahead check (days_ahead between 0 and 366),
    constraint dining_room_book_until check (book_until_minutes between 0 and 10080),
    constraint dining_room_largest_party check (largest_party between 1 and 100),
    constraint dining_room_chooser_known check (chooser in ('smallest', 'first_fit'))
);

create table dining_tables (
    room        text not null references dining_rooms (collection),
    -- its name, as staff and the host stand say it ("T4", "Bar 2")
    id          text not null,
    min_party   integer not null default 1,
    max_party   integer not null,
    -- where it is ("terrace", "bar"); shown to staff
    area        text not null default '',
    -- among tables equally good for a party, the lower goes first
    priority    integer not null default 100,
    -- the room's order (the first-fit baseline's, and the admin's)
    position    integer not null default 0,
    archived_at timestamptz,
    primary key (room, id),
    constraint dining_table_id_shape check (id ~ '^[A-Za-z0-9][A-Za-z0-9 ._-]{0,39}$'),
    constraint dining_table_party check (min_party >= 1 and min_party <= max_party and max_party <= 100),
    constraint dining_table_area_shape check (length(area) <= 100),
    constraint dining_table_priority check (priority between 0 and 10000)
);

-- Tables that may be joined for a larger party, as one set.
create table dining_joins (
    room        text not null references dining_rooms (collection),
    id          text not null,
    tables      text[] not null,
    min_party   integer not null,
    max_party   integer not null,
    priority    integer not null default 100,
    archived_at timestamptz,
    primary key (room, id),
    constraint dining_join_id_shape check (id ~ '^[A-Za-z0-9][A-Za-z0-9 +._-]{0,79}$'),
    constraint dining_join_tables check (cardinality(tables) between 2 and 8),
    constraint dining_join_party check (min_party >= 1 and min_party <= max_party and max_party <= 100),
    constraint dining_join_priority check (priority between 0 and 10000)
);

-- Service periods per weekday, each with its cancellation policy.
create table dining_periods (
    room               text not null references dining_rooms (collection),
    name               text not null,
    -- ISO weekdays, 1 Monday … 7 Sunday
    weekdays           integer[] not null,
    -- the first and the last bookable time, wall-clock in the shop's zone
    opens              time not null,
    last_seating       time not null,
    -- a deposit per cover paid at booking, for parties of at least
    -- deposit_from_party (0: none)
    deposit_minor      bigint not null default 0,
    deposit_from_party integer not null default 1,
    -- a guest may cancel for a full refund until this many hours before
    -- the time; after it the deposit is kept
    cancel_hours       integer not null default 24,
    primary key (room, name),
    constraint dining_period_name_shape check (name ~ '^[a-z][a-z0-9-]{0,39}$'),
    constraint dining_period_weekdays check (weekdays <@ array[1, 2, 3, 4, 5, 6, 7] and cardinality(weekdays) >= 1),
    constraint dining_period_hours check (opens <= last_seating),
    constraint dining_period_deposit check (deposit_minor between 0 and 100000000 and deposit_from_party between 1 and 100),
    constraint dining_period_cancel_hours check (cancel_hours between 0 and 720)
);

-- The turn by party size: a party of n stays the minutes of the smallest
-- up_to_party at least n (the largest row's, past it).
create table dining_turns (
    room         text not null references dining_rooms (collection),
    up_to_party  integer not null,
    minutes      integer not null,
    primary key (room, up_to_party),
    constraint dining_turn_party check (up_to_party between 1 and 100),
    constraint dining_turn_minutes check (minutes between 15 and 720 and minutes % 15 = 0)
);

-- Each bookable time: its product, its room and period, its pacing
-- resource (the product's) and its start.
create table dining_times (
    product_id  text primary key references products (id),
    room        text not null references dining_rooms (collection),
    period      text not null,
    resource_id text not null references resources (id),
    starts_at   timestamptz not null,
    constraint dining_time_once unique (room, starts_at),
    constraint dining_time_period_known foreign key (room, period) references dining_periods (room, name)
        deferrable initially deferred
);
create index dining_times_by_resource on dining_times (resource_id);

-- A table a hold occupies for a range of time. Live while its hold is
-- live or sold and not given back; only live pins meet the constraint.
create table table_pins (
    hold_id  uuid not null references holds (id),
    room     text not null,
    table_id text not null,
    during   tstzrange not null,
    live     boolean not null default true,
    primary key (hold_id, table_id),
    foreign key (room, table_id) references dining_tables (room, id),
    constraint pin_is_a_stay check (not isempty(during) and lower_inc(during) and not upper_inc(during)
                                    and not lower_inf(during) and not upper_inf(during)),
    -- the database never double-books: two live pins on one table never
    -- overlap
    constraint no_table_booked_twice exclude using gist (room with =, table_id with =, during with &&)
        where (live)
);

-- A party's booking: what it is, where it sits, and the policy it was
-- made under, copied so that a later change of the room's policy changes
-- no booking.
create table bookings (
    hold_id                 uuid primary key references holds (id),
    order_id                uuid not null references orders (id),
    room                    text not null references dining_rooms (collection),
    product_id              text not null references products (id),
    party                   integer not null,
    starts_at               timestamptz not null,
    ends_at                 timestamptz not null,
    -- the table, or the joined set, it sits at now
    tables                  text[] not null,
    -- the policy: the deposit paid per cover, and until when the guest
    -- may cancel for a full refund
    deposit_per_cover_minor bigint not null,
    cancel_until            timestamptz not null,
    no_show_at              timestamptz,
    no_show_by              text,
    created_at              timestamptz not null default now(),
    constraint booking_party check (party between 1 and 100),
    constraint booking_stay check (ends_at > starts_at),
    constraint booking_tables check (cardinality(tables) >= 1),
    constraint booking_no_show_says_who check ((no_show_at is null) = (no_show_by is null))
);
create index bookings_by_order on bookings (order_id);
create index bookings_by_room_day on bookings (room, starts_at);

-- A hold that ends (released, expired) or whose units all went back ends
-- its pins, in the statement that ends it: the table is free before
-- anything after it in the transaction (the waiting list's handover)
-- looks.
create function hf_end_pins() returns trigger
language plpgsql as $$
begin
    update table_pins set live = false where hold_id = new.id and live;
    return null;
end;
$$;

create trigger holds_end_pins
    after update of state on holds
    for each row
    when (new.state in ('released', 'expired') and old.state is distinct from new.state)
    execute function hf_end_pins();

create trigger holds_returned_end_pins
    after update of returned on holds
    for each row
    when (new.returned = new.qty and old.returned < new.qty)
    execute function hf_end_pins();

-- A booking's terms for a party at a time product: its room and start,
-- the turn for the party, the deposit per cover it pays (nothing below
-- the period's party size), and until when it may be cancelled.
create function hf_table_terms(p_product text, p_party integer,
                               out room text, out starts_at timestamptz, out turn interval,
                               out deposit_per_cover bigint, out cancel_until timestamptz)
language sql stable as $$
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
$$;

-- The tables and joined sets of a room that seat `p_party` and are free
-- for `p_during` (pins of `p_except`, a booking being moved, do not
-- count), best first by the room's chooser: the smallest that fits, a
-- single table before a joined set, the least idle time left beside the
-- neighbouring bookings on its tables (capped at four hours a side), the
-- lower priority, the name; or, for the first-fit baseline, the room's
-- order.
create function hf_free_sets(p_room text, p_party integer, p_during tstzrange, p_except uuid)
returns table (set_id text, tables text[], max_party integer, joined boolean, idle interval,
               priority integer)
language sql stable as $$
    with room as (
        select chooser from dining_rooms where collection = p_room
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
        select s.* from sets s
         where p_party between s.min_party and s.max_party
           and not exists (select 1 from table_pins p
                            where p.room = p_room and p.table_id = any (s.tables) and p.live
                              and p.during && p_during
                              and p.hold_id is distinct from p_except)
    )
    select f.set_id, f.tables, f.max_party, f.joined,
           (select sum(
                   least(coalesce(lower(p_during) - (
                       select max(upper(p.during)) from table_pins p
                        where p.room = p_room and p.table_id = x.id and p.live
                          and p.hold_id is distinct from p_except
                          and p.during && tstzrange(lower(p_during) - interval '4 hours', lower(p_during))),
                       interval '4 hours'), interval '4 hours')
                 + least(coalesce((
                       select min(lower(p.during)) from table_pins p
                        where p.room = p_room and p.table_id = x.id and p.live
                          and p.hold_id is distinct from p_except
                          and p.during && tstzrange(upper(p_during), upper(p_during) + interval '4 hours'))
                       - upper(p_during), interval '4 hours'), interval '4 hours'))
              from unnest(f.tables) as x(id)) as idle,
           f.priority
      from fitting f, room
     order by case when room.chooser = 'first_fit' then f.position end,
              case when room.chooser = 'first_fit' then f.set_id end,
              f.max_party, f.joined, idle, f.priority, f.set_id;
$$;

-- Seat a party: in the transaction that holds its covers (the hold of
-- `p_purchase` on `p_resource`, the time's pacing resource), the smallest
-- free table or joined set that fits is pinned for [start, start + turn)
-- and the booking written with its policy. No row: no table fits, and
-- nothing was written (the caller rolls the hold back).
--
-- Lock: the room's row, after every resource and account lock the
-- transaction took (the engine's lock order ends with rooms, in id order).
create function hf_seat_party(p_order uuid, p_purchase uuid, p_resource text, p_product text,
                              p_party integer)
returns table (tables text[], starts_at timestamptz, ends_at timestamptz)
language plpgsql as $$
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
$$;

-- Move a live booking to another free table or set of its room that
-- seats its party, for the same stay. Outcomes: moved, same, not_found,
-- ended (its hold is not live or sold), unknown_set, does_not_fit,
-- not_free.
create function hf_move_booking(p_hold uuid, p_set text)
returns text
language plpgsql as $$
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
    if not exists (select 1 from table_pins where hold_id = p_hold and live) then
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
$$;

-- The waiting list of a table time: each entry in line order (its
-- quantity is its party) is offered the time only with a table, seated
-- as a checkout is; an entry no free table fits keeps its place. Covers
-- never wait for the line without a table: nothing is set aside.
-- Called by hf_hand_over with the resource's row locked.
create function hf_hand_over_tables(p_resource text, p_now timestamptz)
returns integer
language plpgsql as $$
declare
    r         resources;
    e         record;
    v         record;
    v_left    integer;
    v_hold    uuid;
    v_order   uuid;
    v_until   timestamptz;
    v_offered integer := 0;
    v_locked  boolean := false;
begin
    if not exists (select 1 from waitlist_entries w join products p on p.id = w.product_id
                    where p.resource_id = p_resource and w.state = 'waiting') then
        return 0;
    end if;
    -- lock: this resource
    perform 1 from resources where id = p_resource for no key update;
    select * into r from resources where id = p_resource;
    v_left := r.total - r.held - r.sold;
    for e in
        select w.id, w.qty, w.name, w.email, w.email_key, w.provider, w.token, w.client_address,
               p.id as product_id, p.name as product_name, p.currency,
               p.waitlist_claim_minutes, p.max_per_order
          from waitlist_entries w
          join products p on p.id = w.product_id
         where p.resource_id = p_resource and w.state = 'waiting'
           and p.active and p.archived_at is null
           and (p.sale_closes_at is null or p.sale_closes_at > p_now)
         order by w.line_no
           for update of w
    loop
        exit when v_left <= 0;
        continue when e.qty > v_left;
        continue when hf_units_held_by_email(e.email_key, e.product_id) + e.qty > e.max_per_order;
        select * into v from hf_table_terms(e.product_id, e.qty);
        continue when not found or v.starts_at <= p_now;
        if not v_locked then
            -- lock: the room, after the resource
            perform 1 from dining_rooms where collection = v.room for no key update;
            v_locked := true;
        end if;
        continue when not exists (
            select 1 from hf_free_sets(v.room, e.qty, tstzrange(v.starts_at, v.starts_at + v.turn, '[)'), null));
        v_hold := hf_uuid_v7();
        v_order := gen_random_uuid();
        v_until := least(p_now + make_interval(mins => e.waitlist_claim_minutes), v.starts_at);
        insert into holds (id, resource_id, account_id, qty, expires_at)
        values (v_hold, p_resource, 'waitlist:' || e.id, e.qty, v_until);
        insert into hold_events (hold_id, kind, to_state, actor, detail)
        values (v_hold, 'held', 'held', 'waitlist',
                jsonb_build_object('qty', e.qty, 'entry', e.id,
                                   'ttl_seconds', extract(epoch from v_until - p_now)::integer));
        update resources
           set held = held + e.qty, next_expiry = least(next_expiry, v_until), updated_at = p_now
         where id = p_resource;
        insert into orders (id, token, checkout_key, customer_name, customer_email, currency,
                            amount_minor, provider, email_key, client_address, hold_id)
        values (v_order, replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', ''),
                'waitlist-' || e.id, e.name, e.email, e.currency, v.deposit_per_cover * e.qty,
                e.provider, e.email_key, e.client_address, v_hold);
        insert into order_lines (order_id, product_id, name, qty, unit_price_minor, paid_minor)
        values (v_order, e.product_id, e.product_name, e.qty, v.deposit_per_cover,
                v.deposit_per_cover * e.qty);
        perform 1 from hf_seat_party(v_order, v_hold, p_resource, e.product_id, e.qty);
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
    return v_offered;
end;
$$;

-- Units that come free go to the waiting list in the transaction that
-- frees them (0070, 0073); a table time's go with a table
-- (hf_hand_over_tables), everything else's as before.
create or replace function hf_hand_over(p_resource text, p_now timestamptz)
returns integer
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
    if exists (select 1 from dining_times where resource_id = p_resource) then
        return hf_hand_over_tables(p_resource, p_now);
    end if;
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

-- The times of a room between two moments that a party could book now,
-- with the covers each has left and whether a free table or set seats the
-- party for its turn: the database's answer, which the pages keep for the
-- crowd and a refused booking offers from (the nearest first).
create function hf_bookable_times(p_room text, p_from timestamptz, p_to timestamptz, p_party integer)
returns table (product_id text, starts_at timestamptz, covers_left integer, seats boolean)
language sql stable as $$
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
$$;

-- The drift check covers tables too: a dining time's resource drifts when
-- its counters disagree with its holds (as any resource's), or when a hold
-- that counts (held, in the payment phase, or sold and not all returned)
-- has no live pin, or a live pin's hold no longer counts.
create or replace function hf_check(p_resource text default null)
returns table (resource_id text, total integer, held integer, sold integer,
               rows_held integer, rows_sold integer, drift boolean)
language sql stable as $$
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
                                           or h.state = 'confirmed' and h.returned < h.qty))))
      from resources r
      left join (
            select h.resource_id,
                   sum(h.qty) filter (where h.state in ('held', 'awaiting_payment')) as held,
                   sum(h.qty - h.returned) filter (where h.state = 'confirmed') as sold
              from holds h
             where p_resource is null or h.resource_id = p_resource
             group by h.resource_id
      ) x on x.resource_id = r.id
     where p_resource is null or r.id = p_resource
     order by r.id;
$$;
