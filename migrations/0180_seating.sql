-- Reserved seating (docs/design.md, "Reserved seating"): a seated event's
-- plan is sections of rows of seats; each section is a product of the kind
-- `seat` with a resource of its own (its total: the seats on sale), each
-- seat a row here, and a seat held or sold is a pin on the hold. The
-- database keeps what matters true whatever the code above it does: a
-- unique index on the seat among live pins (no seat held or sold twice), a
-- pin only on a seat on sale of its hold's section for a live hold, a seat
-- with a live pin never blocked, and a pin ended with its hold.

-- The kind `seat` itself is the code's to write (`holdfast migrate` writes
-- product_kinds from the kinds the code knows), as every kind is.

-- The shop's one setting for seats: whether "best available" may sell
-- seats apart when no stretch of a row has them all together.
create table seating_settings (
    only_row   boolean primary key default true,
    splits     boolean not null default true,
    updated_at timestamptz not null default now(),
    constraint seating_settings_one_row check (only_row)
);
insert into seating_settings default values;

-- What a section is sold at: a name, a colour on the map and a price (its
-- sections' products take it).
create table seat_categories (
    collection  text not null references collections (id),
    id          text not null,
    name        text not null,
    colour      text not null default '#2f6f4f',
    price_minor bigint not null,
    position    integer not null default 0,
    primary key (collection, id),
    constraint seat_category_id_shape check (id ~ '^[a-z0-9][a-z0-9-]{0,99}$'),
    constraint seat_category_name_shape check (length(name) between 1 and 100),
    constraint seat_category_colour_shape check (colour ~ '^#[0-9a-f]{6}$'),
    constraint seat_category_price check (price_minor >= 0)
);

-- A section: a product of the kind `seat` whose resource's total is its
-- seats on sale.
create table seat_sections (
    product_id  text primary key references products (id),
    resource_id text not null unique references resources (id),
    collection  text not null references collections (id),
    category    text not null,
    name        text not null,
    position    integer not null default 0,
    foreign key (collection, category) references seat_categories (collection, id),
    constraint seat_section_name_shape check (length(name) between 1 and 100)
);

-- A seat. `run` is a stretch of a row between aisles: seats of one run
-- whose `pos` follow each other are next to each other. `row_rank` 1 is the
-- row nearest the stage. `x`, `y` place it on the map.
create table seats (
    id        bigint generated always as identity primary key,
    section   text not null references seat_sections (product_id),
    label     text not null,
    row_label text not null,
    number    integer not null,
    row_rank  integer not null,
    run       integer not null,
    pos       integer not null,
    x         integer not null,
    y         integer not null,
    access    text not null default 'none',
    state     text not null default 'open',
    note      text not null default '',
    unique (section, label),
    unique (section, run, pos),
    constraint seat_label_shape check (label ~ '^[A-Za-z0-9][A-Za-z0-9 ._-]{0,23}$'),
    constraint seat_row_shape check (row_label ~ '^[A-Za-z0-9][A-Za-z0-9 ._-]{0,11}$'),
    constraint seat_number_shape check (number between 0 and 9999 and row_rank between 1 and 999
                                        and pos between 0 and 9999),
    constraint seat_access_known check (access in ('none', 'wheelchair', 'companion')),
    constraint seat_state_known check (state in ('open', 'blocked', 'held_back')),
    constraint seat_note_shape check (length(note) <= 200)
);
create index seats_by_section on seats (section, row_rank, run, pos);

-- A seat held or sold: a pin on the hold, live while the hold is (and,
-- sold, until the seat is refunded).
create table seat_pins (
    seat_id    bigint not null references seats (id),
    hold_id    uuid not null references holds (id),
    live       boolean not null default true,
    pinned_at  timestamptz not null default now(),
    ended_at   timestamptz,
    end_reason text,
    primary key (hold_id, seat_id),
    constraint seat_pin_end_shape check (live = (ended_at is null) and live = (end_reason is null))
);
-- no seat held or sold twice
create unique index seat_pins_live on seat_pins (seat_id) where live;

-- A ticket's seat, set as its code is issued.
alter table order_codes add column seat_id bigint references seats (id);

-- A basket line of seats: the seats by label, or "best available" (the
-- line's qty, together or split).
alter table basket_lines add column seat_labels text[];
alter table basket_lines add column seat_best text;
alter table basket_lines add constraint basket_seat_choice
    check ((seat_labels is null or seat_best is null)
           and (seat_best is null or seat_best in ('together', 'split'))
           and (seat_labels is null or cardinality(seat_labels) = qty));

-- A pin is made only on a seat on sale, of its hold's own section, for a
-- live hold.
create function hf_seat_pin_guard() returns trigger
language plpgsql as $$
declare
    v_seat seats;
    v_hold holds;
begin
    select * into v_seat from seats where id = new.seat_id;
    select * into v_hold from holds where id = new.hold_id;
    if v_seat.state <> 'open' then
        raise exception 'seat % is not on sale (%)', v_seat.label, v_seat.state
            using errcode = 'check_violation', constraint = 'seat_pin_on_sale';
    end if;
    if not exists (select 1 from seat_sections s
                    where s.product_id = v_seat.section and s.resource_id = v_hold.resource_id) then
        raise exception 'seat % is not of the section its hold holds', v_seat.label
            using errcode = 'check_violation', constraint = 'seat_pin_section';
    end if;
    if v_hold.state not in ('held', 'awaiting_payment', 'confirmed') or not new.live then
        raise exception 'a pin is made live, on a live hold'
            using errcode = 'check_violation', constraint = 'seat_pin_live_hold';
    end if;
    return new;
end;
$$;
create trigger seat_pins_guard before insert on seat_pins
    for each row execute function hf_seat_pin_guard();

-- A pin ends with its hold: released or expired, in the same statement.
create function hf_seat_pins_end() returns trigger
language plpgsql as $$
begin
    update seat_pins
       set live = false, ended_at = coalesce(new.ended_at, clock_timestamp()),
           end_reason = new.state
     where hold_id = new.id and live;
    return null;
end;
$$;
create trigger holds_end_seat_pins after update of state on holds
    for each row when (new.state in ('released', 'expired')
                       and old.state in ('held', 'awaiting_payment'))
    execute function hf_seat_pins_end();

-- A seat held or sold stays on sale and in its section, whatever the edit.
create function hf_seat_keep_pinned() returns trigger
language plpgsql as $$
begin
    if exists (select 1 from seat_pins p where p.seat_id = old.id and p.live) then
        raise exception 'seat % is held or sold: it keeps its place on sale', old.label
            using errcode = 'check_violation', constraint = 'seat_pinned_stays';
    end if;
    return new;
end;
$$;
create trigger seats_keep_pinned before update of state, section on seats
    for each row when (new.state <> 'open' or new.section <> old.section)
    execute function hf_seat_keep_pinned();

-- Each ticket code of a seat section takes a seat of its order's pins, as
-- the codes are issued (one code per unit, so one per seat).
create function hf_seat_codes() returns trigger
language plpgsql as $$
begin
    if not exists (select 1 from inserted i join seat_sections s on s.product_id = i.product_id) then
        return null;
    end if;
    update order_codes c
       set seat_id = x.seat_id
      from (select i.code, s.seat_id
              from (select i.code, i.order_id, i.product_id,
                           row_number() over (partition by i.order_id, i.product_id order by i.code) as n
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
                       and not exists (select 1 from order_codes c2 where c2.seat_id = p.seat_id
                                          and c2.order_id = o.id and c2.refunded_at is null)) s
                on s.order_id = i.order_id and s.product_id = i.product_id and s.n = i.n) x
     where c.code = x.code;
    return null;
end;
$$;
create trigger order_codes_seats after insert on order_codes
    referencing new table as inserted
    for each statement execute function hf_seat_codes();

-- The section a resource is, if it is one.
create function hf_seat_section(p_resource text) returns seat_sections
language sql stable as $$
    select * from seat_sections where resource_id = p_resource
$$;

-- Seats as the map and the messages name them: "C-11, C-12".
create function hf_seat_words(p_ids bigint[]) returns text
language sql stable as $$
    select string_agg(s.label, ', ' order by s.row_rank, s.run, s.pos)
      from seats s where s.id = any (p_ids)
$$;

-- The best way `p_qty` free standard seats of the section sit together in
-- one stretch, not using `p_exclude`, in the rows ranked `p_from` to `p_to`;
-- nearest `p_near` (x, y) when given, else by the house's rules: fewest
-- orphans (a lone free seat left beside the group), then the row nearest
-- the stage, then the middle of the house. Up to `p_limit` ways, best
-- first, each as its seat ids. Reads only: the caller holds the section's
-- lock.
create function hf_seat_stretches(p_section text, p_qty integer, p_exclude bigint[],
                                  p_near point, p_limit integer,
                                  p_from integer default 1, p_to integer default 999)
returns table (seat_ids bigint[], orphans integer)
language sql stable as $$
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
$$;

-- The best way `p_qty` seats sit together in the section (as
-- hf_seat_stretches ranks them, best first), looked for in bands of rows
-- from the stage back, each twice as deep as the one before: a way that
-- leaves no orphan ends the search, since no row further back can beat
-- it; otherwise the fewest orphans nearest the stage. An emptier house is
-- answered from its front rows alone. Reads only: the caller holds the
-- section's lock.
create function hf_seat_best(p_section text, p_qty integer, p_exclude bigint[])
returns bigint[]
language plpgsql stable as $$
declare
    v_last integer;
    v_from integer := 1;
    v_depth integer := 4;
    v_best bigint[];
    v_orphans integer;
    v_ids bigint[];
    v_left integer;
begin
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
$$;

-- Choose seats in the section of `p_resource`: the seats `p_labels` (all or
-- none), or the best `p_qty` (together, or split when `p_together` is false
-- and the shop lets a split be sold). Reads only; the caller holds the
-- section's lock and pins what is chosen. `p_exclude`: seats chosen
-- already by the caller; `p_own`: units the caller holds for these seats
-- already (a basket holds before it pins). Answers:
--   chosen        seat_ids, labels
--   taken         (named) `taken` the labels not free now, `offers` the
--                 nearest seats together instead
--   unknown       (named) `taken` the labels the section does not have
--   not_together  (best, together) no stretch has them all: `offers` the
--                 best split, `split_allowed` whether it may be sold
--   sold_out      fewer free seats than asked for
create function hf_seat_choose(p_resource text, p_labels text[], p_qty integer,
                               p_together boolean, p_exclude bigint[], p_own integer default 0)
returns table (status text, seat_ids bigint[], labels text[], taken text[], offers jsonb,
               split_allowed boolean, free integer)
language plpgsql stable as $$
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
    -- pins; the drift check holds them to it), less what the caller chose,
    -- and with the units the caller holds already for these seats
    -- (`p_own`: a basket holds its units before it pins its seats)
    select r.total - r.held - r.sold - coalesce(cardinality(p_exclude), 0) + coalesce(p_own, 0) into v_free
      from resources r where r.id = p_resource;
    if p_labels is not null then
        if cardinality(p_labels) not between 1 and 100 then
            perform hf_bad_input('name 1 to 100 seats');
        end if;
        select array_agg(l order by l) into v_unknown
          from unnest(p_labels) l
         where not exists (select 1 from seats s where s.section = v_section.product_id and s.label = l);
        if v_unknown is not null then
            return query select 'unknown', null::bigint[], null::text[], v_unknown, '[]'::jsonb,
                                null::boolean, v_free;
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
            select 'taken', null::bigint[], null::text[], v_taken,
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
$$;

-- Ended plain holds on a section count as free: their pins end now (the
-- caller holds the section's lock).
create function hf_seat_expire_due(p_resource text) returns void
language plpgsql as $$
declare
    v_now timestamptz := clock_timestamp();
begin
    if (select r.next_expiry <= v_now from resources r where r.id = p_resource) then
        perform hf_expire_due_plain(p_resource, v_now, 'lazy-expiry', null);
    end if;
end;
$$;

-- Pin seats to a hold.
create function hf_seat_pin(p_hold uuid, p_seat_ids bigint[]) returns void
language sql as $$
    insert into seat_pins (seat_id, hold_id) select unnest(p_seat_ids), p_hold
$$;

-- An order line names its seats: "Stalls — C-11, C-12".
create function hf_seat_name_line(p_order uuid, p_product text, p_seat_ids bigint[]) returns void
language sql as $$
    update order_lines
       set name = name || ' — ' || hf_seat_words(p_seat_ids)
     where order_id = p_order and product_id = p_product
$$;

-- The seats of one line of a basket checkout (hf_hold_basket has held its
-- units and holds the section's lock): chosen and pinned to the basket's
-- hold of the section, and named on the order's line; or why not (nothing
-- written: the caller rolls the basket back). A hold pinned already
-- answers its seats.
create function hf_seat_claim(p_basket uuid, p_resource text, p_labels text[], p_qty integer,
                              p_together boolean, p_order uuid, p_product text)
returns table (status text, labels text[], taken text[], offers jsonb, split_allowed boolean,
               free integer)
language plpgsql as $$
declare
    c record;
    v_hold uuid;
begin
    select h.id into v_hold from holds h
     where h.basket_id = p_basket and h.resource_id = p_resource and h.state = 'held';
    if v_hold is null then
        perform hf_bad_input(format('the basket holds nothing of %s', p_resource));
    end if;
    -- the hold has its seats already (the same start run again): they are
    -- the answer, and nothing more is pinned or named
    if exists (select 1 from seat_pins p where p.hold_id = v_hold and p.live) then
        return query
            select 'chosen', array(select s.label from seat_pins p join seats s on s.id = p.seat_id
                                    where p.hold_id = v_hold and p.live
                                    order by s.row_rank, s.run, s.pos),
                   null::text[], null::jsonb, null::boolean, null::integer;
        return;
    end if;
    perform hf_seat_expire_due(p_resource);
    select * into c from hf_seat_choose(p_resource, p_labels, p_qty, p_together, '{}',
                                        (select qty from holds where id = v_hold));
    if c.status = 'chosen' then
        if cardinality(c.seat_ids) <> (select qty from holds where id = v_hold) then
            perform hf_bad_input('the seats chosen are not the units held');
        end if;
        perform hf_seat_pin(v_hold, c.seat_ids);
        perform hf_seat_name_line(p_order, p_product, c.seat_ids);
    end if;
    return query select c.status, c.labels, c.taken, c.offers, c.split_allowed, c.free;
end;
$$;

-- Checkouts of one section, combined (by the seats' combiner, as
-- src/checkout/start_batches.rs combines a tier's): the
-- arrays of hf_start_checkouts, and for each checkout the seats it names
-- (`p_seats[i]`, labels joined by commas) or null and `p_together[i]` for
-- the best `p_qtys[i]`. Lock order as every path: the limits' locks, then
-- the section. Each checkout's seats are chosen in arrival order; those
-- that got seats go to hf_start_checkouts (limits, orders, lines, holds),
-- and each hold granted is pinned its seats. A checkout refused there gives
-- its seats back, and the checkouts refused for want of seats are chosen
-- again (at most twice more), so nobody is told a seat is taken that
-- nobody got.
create function hf_start_seat_checkouts(p_resource text, p_keys text[], p_accounts text[],
                                        p_qtys integer[], p_products text[],
                                        p_product_names text[], p_unit_prices bigint[],
                                        p_currencies text[], p_tokens text[], p_names text[],
                                        p_emails text[], p_providers text[], p_email_keys text[],
                                        p_addresses text[], p_email_caps integer[],
                                        p_address_caps integer[], p_seats text[],
                                        p_together boolean[])
returns table (status text, order_id uuid, hold_id uuid, available integer,
               created_at timestamptz, seats text[], taken text[], offers jsonb,
               split_allowed boolean)
language plpgsql as $$
declare
    v_n integer := coalesce(cardinality(p_keys), 0);
    v_status text[] := array_fill(null::text, array[greatest(v_n, 1)]);
    v_order uuid[] := array_fill(null::uuid, array[greatest(v_n, 1)]);
    v_hold uuid[] := array_fill(null::uuid, array[greatest(v_n, 1)]);
    v_avail integer[] := array_fill(null::integer, array[greatest(v_n, 1)]);
    v_at timestamptz[] := array_fill(null::timestamptz, array[greatest(v_n, 1)]);
    v_pick jsonb[] := array_fill(null::jsonb, array[greatest(v_n, 1)]);
    v_labels jsonb[] := array_fill(null::jsonb, array[greatest(v_n, 1)]);
    v_taken jsonb[] := array_fill(null::jsonb, array[greatest(v_n, 1)]);
    v_offers jsonb[] := array_fill(null::jsonb, array[greatest(v_n, 1)]);
    v_split boolean[] := array_fill(null::boolean, array[greatest(v_n, 1)]);
    -- this round: who is chosen for, and who goes on to the holds
    v_decide integer[];
    v_go integer[];
    v_chosen bigint[];
    v_gave_back boolean;
    v_named text[];
    c record;
    x record;
begin
    if v_n not between 1 and 1000 then
        perform hf_bad_input(format('a batch starts 1 to 1000 checkouts, got %s', v_n));
    end if;
    if coalesce(cardinality(p_seats), -1) <> v_n or coalesce(cardinality(p_together), -1) <> v_n then
        perform hf_bad_input('every checkout needs its seats or its together: arrays of one length');
    end if;
    if (hf_seat_section(p_resource)).product_id is null then
        perform hf_bad_input(format('%s is not a seated section', p_resource));
    end if;
    -- lock: every e-mail and address of the batch, in one order, then the
    -- section (hf_start_checkouts takes both again, as they are held)
    perform hf_limit_lock(k.k)
       from (select distinct k from unnest(p_email_keys || p_addresses) k
              where k is not null order by k) k;
    perform 1 from resources where id = p_resource for no key update;
    perform hf_seat_expire_due(p_resource);

    -- the checkouts that choose seats: new forms (a form seen before, here
    -- or earlier, goes on to be answered as the order it has)
    v_decide := '{}';
    v_go := '{}';
    for i in 1 .. v_n loop
        if p_keys[i] = any (p_keys[1 : i - 1])
           or exists (select 1 from orders o where o.checkout_key = p_keys[i]) then
            v_go := v_go || i;
        else
            v_decide := v_decide || i;
        end if;
    end loop;

    for v_round in 1 .. 3 loop
        -- seats granted in an earlier round are pinned now
        v_chosen := '{}';
        for k in 1 .. coalesce(cardinality(v_decide), 0) loop
            declare
                i integer := v_decide[k];
            begin
                v_named := case when p_seats[i] is null then null
                                else string_to_array(p_seats[i], ',') end;
                select * into c
                  from hf_seat_choose(p_resource, v_named, p_qtys[i],
                                      coalesce(p_together[i], true), v_chosen);
                if c.status = 'chosen' then
                    v_pick[i] := to_jsonb(c.seat_ids);
                    v_labels[i] := to_jsonb(c.labels);
                    v_chosen := v_chosen || c.seat_ids;
                    v_status[i] := null;
                    v_go := v_go || i;
                else
                    v_status[i] := case c.status when 'taken' then 'seats_taken'
                                                 when 'unknown' then 'unknown_seats'
                                                 else c.status end;
                    v_taken[i] := to_jsonb(c.taken);
                    v_offers[i] := c.offers;
                    v_split[i] := c.split_allowed;
                    v_avail[i] := c.free;
                end if;
            end;
        end loop;
        exit when coalesce(cardinality(v_go), 0) = 0;

        -- the chosen (and the forms seen before) to the holds, in arrival order
        select array_agg(g order by g) into v_go from unnest(v_go) g;
        v_gave_back := false;
        for x in
            select r.status, r.order_id, r.hold_id, r.available, r.created_at, u.n
              from hf_start_checkouts(
                       p_resource,
                       array(select p_keys[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_accounts[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select case when v_pick[g] is null then p_qtys[g]
                                         else jsonb_array_length(v_pick[g]) end
                               from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_products[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_product_names[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_unit_prices[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_currencies[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_tokens[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_names[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_emails[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_providers[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_email_keys[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_addresses[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_email_caps[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_address_caps[g] from unnest(v_go) with ordinality u(g, o) order by o))
                   with ordinality as r(status, order_id, hold_id, available, created_at, n)
              join lateral (select v_go[r.n::int] as n) u on true
        loop
            v_status[x.n] := x.status;
            v_order[x.n] := x.order_id;
            v_hold[x.n] := x.hold_id;
            v_avail[x.n] := x.available;
            v_at[x.n] := x.created_at;
            if x.status = 'started' and v_pick[x.n] is not null then
                perform hf_seat_pin(x.hold_id,
                                    array(select jsonb_array_elements_text(v_pick[x.n])::bigint));
                perform hf_seat_name_line(x.order_id, p_products[x.n],
                                          array(select jsonb_array_elements_text(v_pick[x.n])::bigint));
            elsif v_pick[x.n] is not null then
                -- refused after all: its seats go back
                v_pick[x.n] := null;
                v_labels[x.n] := null;
                v_gave_back := true;
            end if;
        end loop;
        -- choose again for those refused for want of seats, only if seats
        -- came back
        v_decide := array(select i from generate_series(1, v_n) i
                           where v_status[i] in ('seats_taken', 'not_together', 'sold_out'));
        v_go := '{}';
        exit when not v_gave_back or cardinality(v_decide) = 0;
    end loop;

    return query
        select v_status[i], v_order[i], v_hold[i], v_avail[i], coalesce(v_at[i], now()),
               case when v_status[i] = 'started' and v_labels[i] is not null
                    then array(select jsonb_array_elements_text(v_labels[i])) end,
               case when v_taken[i] is not null and jsonb_typeof(v_taken[i]) = 'array'
                    then array(select jsonb_array_elements_text(v_taken[i])) end,
               v_offers[i], v_split[i]
          from generate_series(1, v_n) i
         order by i;
end;
$$;

-- The waiting list's handover offers seats (as 0160's, and for a seated
-- section): each entry in line is offered the best seats together, pinned
-- to its offer's hold; an entry no stretch can seat keeps its place (or,
-- served strictly in order, stops its product's line), and what is set
-- aside for the line is pinned too, so a section's live pins are always
-- its held and sold units.
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
    -- a seated section: the seats of each offer
    v_seated  boolean;
    v_seats   bigint[];
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
    v_seated := (hf_seat_section(p_resource)).product_id is not null;
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
        v_seats := null;
        if e.qty <= v_left and v_seated then
            select c.seat_ids into v_seats
              from hf_seat_choose(p_resource, null, e.qty, true, '{}') c
             where c.status = 'chosen';
        end if;
        if e.qty > v_left or (v_seated and v_seats is null) then
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
        if v_seats is not null then
            perform hf_seat_pin(v_hold, v_seats);
            perform hf_seat_name_line(v_order, e.product_id, v_seats);
        end if;
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

-- Late money claims a seat order again only if every one of its seats is
-- free, and pins the same seats (as 0090's, with the seats).
create or replace function hf_claim_again(p_id uuid, p_payment_ref text, p_actor text default 'payment')
returns table (status text, purchase_id uuid, resource_id text, available integer)
language plpgsql as $$
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
$$;

-- Whether an ended purchase could be claimed again (a hint, as 0090's):
-- its seats free too.
create or replace function hf_claimable(p_purchase uuid)
returns boolean
language sql stable as $$
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
$$;

-- The drift check covers seats: a section drifts when its live pins are
-- not its held and sold units (as 0160's, tables too, and the pins).
create or replace function hf_check(p_resource text default null)
returns table (resource_id text, total integer, held integer, sold integer, rows_held integer,
               rows_sold integer, drift boolean)
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
$$;

-- A staff refund gives back the seats of the codes it stops: their pins
-- end (the caller holds the order's and the sections' locks, and calls
-- hf_return for the units next); seats taken off sale are blocked.
create function hf_seat_return(p_purchase uuid, p_codes text[], p_restock boolean) returns integer
language plpgsql as $$
declare
    v_seats bigint[];
begin
    with ended as (
        update seat_pins p
           set live = false, ended_at = clock_timestamp(), end_reason = 'returned'
          from order_codes c, holds h
         where c.code = any (p_codes) and c.seat_id = p.seat_id
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
$$;

-- Staff put seats on sale, block them or hold them back (with a note), in
-- the section's lock: a seat held or sold is refused (named), the others
-- change, and the section's total follows its seats on sale.
create function hf_seat_set_state(p_section text, p_labels text[], p_state text, p_note text)
returns table (status text, changed integer, refused text[], total integer)
language plpgsql as $$
declare
    v_section seat_sections;
    v_refused text[];
    v_unknown text[];
    v_changed integer;
    v_total integer;
    v_now timestamptz := clock_timestamp();
begin
    select * into v_section from seat_sections where product_id = p_section;
    if not found then
        perform hf_bad_input(format('%s is not a seated section', p_section));
    end if;
    if p_state not in ('open', 'blocked', 'held_back') then
        perform hf_bad_input('a seat is open, blocked or held_back');
    end if;
    if p_labels is null or cardinality(p_labels) not between 1 and 10000 then
        perform hf_bad_input('name 1 to 10,000 seats');
    end if;
    if p_note is null or length(p_note) > 200 then
        perform hf_bad_input('a note is at most 200 characters');
    end if;
    -- lock: the section
    perform 1 from resources where id = v_section.resource_id for no key update;
    select array_agg(l order by l) into v_unknown
      from unnest(p_labels) l
     where not exists (select 1 from seats s where s.section = p_section and s.label = l);
    if v_unknown is not null then
        return query select 'unknown', 0, v_unknown, null::integer;
        return;
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
       and (s.state <> p_state or s.note <> p_note);
    get diagnostics v_changed = row_count;
    select count(*)::int into v_total from seats s where s.section = p_section and s.state = 'open';
    perform 1 from hf_upsert_resource(v_section.resource_id, v_total);
    perform hf_hand_over(v_section.resource_id, v_now);
    return query select 'changed', v_changed, null::text[], v_total;
end;
$$;

-- A section's plan, as the catalogue file and the admin give it: rows in
-- the compact form, each {"row": "C", "rank": 3, "seats": [1, 24],
-- "aisles_after": [12], "wheelchair": [1], "companion": [2]} (rank 1: the
-- row nearest the stage; seats numbered from the first to the last; an
-- aisle after each number of `aisles_after` ends a run). The seats are
-- drawn in rows centred on x = 0, 10 apart, an aisle 20 wide, rows 12 deep.
-- In the section's lock: seats new to the plan are added (on sale), seats
-- still in it take their new place and access, seats gone from it are
-- removed, or blocked ("off the plan") when a pin ever named them. A seat
-- held or sold now must stay in the plan: an edit that drops one is
-- refused, naming them, and changes nothing. The section's total follows
-- its seats on sale.
create function hf_seat_plan(p_section text, p_rows jsonb)
returns table (status text, added integer, placed integer, removed integer, refused text[],
               total integer)
language plpgsql as $$
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
            or exists (select 1 from order_codes c where c.seat_id = g.id)
    ), blocked as (
        update seats s set state = 'blocked', note = 'off the plan', run = -s.id, pos = 0
          from named n where s.id = n.id and (s.state <> 'blocked' or s.note <> 'off the plan')
        returning 1
    )
    select count(*)::int into v_blocked from blocked;
    delete from seats s
     where s.section = p_section and not exists (select 1 from plan_seats p where p.label = s.label)
       and not exists (select 1 from seat_pins p where p.seat_id = s.id)
       and not exists (select 1 from order_codes c where c.seat_id = s.id);
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
$$;

-- Outgoing webhooks' order (as 0060's), each line with its seats.
create or replace function hf_webhook_order(p_order uuid)
returns jsonb
language sql stable as $$
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
                          where l.order_id = o.id))
      from orders o where o.id = p_order
$$;

-- The door names a ticket's seat (as 0100's, and the seat): what the code
-- is for and its tier say "Stalls, seat C-12", so the door sends the guest
-- to it.
create or replace function hf_redeem(p_code text, p_by text, p_place text, p_attempt uuid default null,
                          p_checks text[] default null, p_override boolean default false)
returns table (outcome text, kind text, product_kind text, order_id uuid, customer_name text,
               what text, redeemed_at timestamptz, redeemed_by text, place text,
               for_title text, for_tier text, for_starts timestamptz, overridden boolean)
language plpgsql as $$
declare
    v_order uuid;
    v_kind text;
    v_product_kind text;
    v_state text;
    v_name text;
    v_refunded boolean;
    v_what text;
    v_here boolean;
    v_title text;
    v_tier text;
    v_starts timestamptz;
    r redemptions;
begin
    if p_by is null or length(p_by) not between 1 and 254 then
        perform hf_bad_input('who redeems must be named (1 to 254 characters)');
    end if;
    if p_place is null or length(p_place) > 100 then
        perform hf_bad_input('the place is at most 100 characters');
    end if;
    if p_code is null or length(p_code) not between 1 and 64 then
        return query select 'not_valid', null::text, null::text, null::uuid, null::text,
                            null::text, null::timestamptz, null::text, null::text,
                            null::text, null::text, null::timestamptz, false;
        return;
    end if;
    -- unlocked: which order a code belongs to never changes
    select c.order_id, 'ticket' into v_order, v_kind from order_codes c where c.code = p_code;
    if not found then
        select o.id, 'pickup' into v_order, v_kind from orders o where o.pickup_code = p_code;
        -- shared by two orders (drawn before codes were unique): not
        -- something a door can decide
        if (select count(*) from orders o where o.pickup_code = p_code) > 1 then
            return query select 'not_valid', null::text, null::text, null::uuid, null::text,
                                'a pickup code two orders share: look the order up'::text,
                                null::timestamptz, null::text, null::text,
                                null::text, null::text, null::timestamptz, false;
            return;
        end if;
    end if;
    if v_order is null then
        return query select 'not_valid', null::text, null::text, null::uuid, null::text,
                            null::text, null::timestamptz, null::text, null::text,
                            null::text, null::text, null::timestamptz, false;
        return;
    end if;
    -- lock: the order, shared
    select o.state, o.customer_name into v_state, v_name from orders o where o.id = v_order for share;
    if v_kind = 'ticket' then
        select c.refunded_at is not null, p.name || coalesce(', seat ' || s.label, ''), p.kind,
               p_checks is null or p.id = any (p_checks),
               co.title, p.name || coalesce(', seat ' || s.label, ''),
               coalesce(p.starts_at, co.starts_at)
          into v_refunded, v_what, v_product_kind, v_here, v_title, v_tier, v_starts
          from order_codes c join products p on p.id = c.product_id
          join collections co on co.id = p.collection
          left join seats s on s.id = c.seat_id
         where c.code = p_code;
    else
        select coalesce(bool_and(l.refunded_qty = l.qty), true),
               string_agg(l.name || ' × ' || (l.qty - l.refunded_qty), ', ' order by l.name)
                 filter (where l.refunded_qty < l.qty),
               min(p.kind),
               p_checks is null or coalesce(bool_or(p.id = any (p_checks)), false),
               min(co.title), min(p.name), min(p.starts_at)
          into v_refunded, v_what, v_product_kind, v_here, v_title, v_tier, v_starts
          from order_lines l join products p on p.id = l.product_id
          join product_kinds k on k.kind = p.kind
          join collections co on co.id = p.collection
         where l.order_id = v_order and k.code = 'pickup';
    end if;
    select * into r from redemptions x where x.code = p_code;
    -- this very scan, run again after its commit's answer was lost: it
    -- redeemed, and says so again
    if found and p_attempt is not null and r.attempt = p_attempt then
        return query select 'redeemed', v_kind, v_product_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place,
                            v_title, v_tier, v_starts, r.overridden;
        return;
    end if;
    if v_refunded or v_state in ('refund_pending', 'refunded') then
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
    -- another event's, another day's: not this door's, unless someone
    -- who may says so
    if not v_here and not coalesce(p_override, false) then
        return query select 'not_this_door', v_kind, v_product_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place,
                            v_title, v_tier, v_starts, false;
        return;
    end if;
    if r.code is not null then
        return query select 'already_used', v_kind, v_product_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place,
                            v_title, v_tier, v_starts, r.overridden;
        return;
    end if;
    insert into redemptions (code, order_id, kind, redeemed_by, place, attempt, overridden)
    values (p_code, v_order, v_kind, p_by, p_place, p_attempt, not v_here)
    on conflict on constraint redemptions_pkey do nothing
    returning * into r;
    if r.code is not null then
        return query select 'redeemed', v_kind, v_product_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place,
                            v_title, v_tier, v_starts, r.overridden;
        return;
    end if;
    -- another door won the same moment
    select * into r from redemptions x where x.code = p_code;
    return query select 'already_used', v_kind, v_product_kind, v_order, v_name, v_what,
                        r.redeemed_at, r.redeemed_by, r.place,
                        v_title, v_tier, v_starts, r.overridden;
end;
$$;
