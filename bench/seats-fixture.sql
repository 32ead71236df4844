-- Helpers for bench/seats-db (the database's part of reserved seating,
-- proved at SQL level): a hall, sections of rows of seats, and a checkout
-- of one section through hf_start_checkouts, the one path every checkout
-- takes (migrations/0180_seating.sql, 0210_one_checkout_path.sql). They
-- live in a schema of their own, `seatbench`, in a scratch database only;
-- nothing of the product uses them.

create schema seatbench;

-- The kinds `seat` and `ticket`, as `holdfast migrate` writes product_kinds
-- from the kinds the code knows (their units get ticket codes, checked at
-- an event's door: 0200 wants the one with the other).
insert into product_kinds (kind, code, checked_by)
values ('seat', 'ticket', 'event'), ('ticket', 'ticket', 'event') on conflict (kind) do nothing;

-- An event's collection and a seat category of it.
create function seatbench.hall(p_collection text, p_category text, p_price bigint)
returns void
language sql as $$
    insert into collections (id, kind, title) values (p_collection, 'event', 'Hall ' || p_collection)
    on conflict (id) do nothing;
    insert into seat_categories (collection, id, name, price_minor)
    values (p_collection, p_category, initcap(p_category), p_price)
    on conflict do nothing;
$$;

-- A section: its resource (total 0 until its seats are made), its product
-- of the kind `seat`, its row in seat_sections.
create function seatbench.section(p_id text, p_collection text, p_category text)
returns void
language plpgsql as $$
begin
    perform 1 from hf_upsert_resource(p_id, 0);
    insert into products (id, resource_id, kind, name, price_minor, currency, collection,
                          max_per_order)
    select p_id, p_id, 'seat', initcap(p_id), c.price_minor, 'eur', p_collection, 100
      from seat_categories c where c.collection = p_collection and c.id = p_category;
    insert into seat_sections (product_id, resource_id, collection, category, name)
    values (p_id, p_id, p_collection, p_category, initcap(p_id));
end;
$$;

-- A row of `p_count` seats numbered from 1, an aisle after each number of
-- `p_aisles_after` (a new run), rank `p_rank` (1: nearest the stage).
-- Runs are numbered rank * 100 + the run's index in the row; rows are
-- centred on x = 0, 10 apart a seat, an aisle 20 wide.
create function seatbench.row(p_section text, p_row text, p_rank integer, p_count integer,
                              p_aisles_after integer[] default '{}')
returns void
language sql as $$
    insert into seats (section, label, row_label, number, row_rank, run, pos, x, y)
    select p_section, p_row || '-' || n, p_row, n, p_rank,
           p_rank * 100 + (select count(*) from unnest(p_aisles_after) a where a < n)::int,
           n,
           n * 10 + 20 * (select count(*) from unnest(p_aisles_after) a where a < n)::int
               - (10 * (p_count + 1) + 20 * cardinality(p_aisles_after)) / 2,
           p_rank * 12
      from generate_series(1, p_count) n
$$;

-- The section's total follows its seats on sale (as the catalogue's loader
-- will set it).
create function seatbench.open(p_section text)
returns void
language sql as $$
    select 1 from hf_upsert_resource(
        (select resource_id from seat_sections where product_id = p_section),
        (select count(*)::int from seats where section = p_section and state = 'open'));
$$;

-- Who asked what, and what they were answered (the pgbench race reads it).
create table seatbench.answers (
    section text not null,
    status  text not null,
    seats   text[],
    taken   text[],
    offers  jsonb,
    at      timestamptz not null default clock_timestamp()
);

-- One shopper's checkout of `p_qty` of one product, as hf_start_checkouts
-- takes it: a section's seats (`p_seats` the labels, "C-11,C-12", or
-- null for the best, together unless `p_together` is false), or a plain
-- product's units (`p_seated` false). `p_email_cap`: the most its e-mail
-- may hold of it.
create function seatbench.one(p_product text, p_qty integer, p_seats text,
                              p_together boolean default true, p_key text default null,
                              p_seated boolean default true, p_email_cap integer default null)
returns jsonb
language sql volatile as $$
    select jsonb_strip_nulls(jsonb_build_object(
        'key', k.key, 'account', 'checkout:' || k.key,
        'token', replace(gen_random_uuid()::text, '-', ''),
        'name', 'A Shopper', 'email', 'shopper@example.com', 'currency', 'eur',
        'provider', 'stripe',
        'email_key', case when p_email_cap is not null then k.key || '@example.com' end,
        'lines', jsonb_build_array(jsonb_build_object(
            'product', p.id, 'name', initcap(p.id), 'qty', p_qty, 'unit_price', p.price_minor,
            'resource', p.resource_id, 'email_cap', p_email_cap,
            'claim', case when p_seated then 'seats' else 'units' end,
            'seats', case when p_seated then to_jsonb(string_to_array(p_seats, ',')) end,
            'together', case when p_seated then p_together end))))
      from products p, (select coalesce(p_key, gen_random_uuid()::text) as key) k
     where p.id = p_product
$$;

-- The seats a hold has pinned, as the plan labels them.
create function seatbench.pinned(p_hold uuid)
returns text[]
language sql stable as $$
    select array_agg(s.label order by s.row_rank, s.run, s.pos)
      from seat_pins p join seats s on s.id = p.seat_id
     where p.hold_id = p_hold and p.live
$$;

-- One shopper's checkout of one section, as the combiner would send it
-- alone: `p_seats` the labels ("C-11,C-12") or null for the best `p_qty`.
create function seatbench.checkout(p_section text, p_qty integer, p_seats text,
                                   p_together boolean default true,
                                   p_key text default null)
returns table (status text, order_id uuid, hold_id uuid, seats text[], taken text[],
               offers jsonb, split_allowed boolean)
language plpgsql as $$
declare
    r record;
    v_seats text[];
    v_taken text[];
begin
    select * into r
      from hf_start_checkouts(jsonb_build_array(
               seatbench.one(p_section, p_qty, p_seats, p_together, p_key))) c;
    if r.status = 'started' then
        v_seats := seatbench.pinned(r.hold_id);
    end if;
    v_taken := array(select jsonb_array_elements_text(r.detail->'seats'));
    if r.detail is null or not r.detail ? 'seats' then
        v_taken := null;
    end if;
    insert into seatbench.answers (section, status, seats, taken, offers)
    values (p_section, r.status, v_seats, v_taken, r.detail->'offers');
    return query select r.status, r.order_id, r.hold_id, v_seats, v_taken, r.detail->'offers',
                        (r.detail->>'split_allowed')::boolean;
end;
$$;

-- A hold's time is up (as if its minutes had passed): its resource's hint
-- and its expiry a second ago, under the resource's lock first (the order
-- every path takes them). A hold no longer held is left as it is.
create function seatbench.due(p_hold uuid)
returns void
language sql as $$
    update resources set next_expiry = least(next_expiry, now() - interval '1 second')
     where id = (select resource_id from holds where id = p_hold);
    update holds set expires_at = now() - interval '1 second' where id = p_hold and state = 'held';
$$;

-- Free seats of a section left alone: a free standard seat whose
-- neighbours in its run (pos - 1, pos + 1) are both missing or not free.
create function seatbench.orphans(p_section text)
returns integer
language sql stable as $$
    with free as (
        select s.run, s.pos from seats s
         where s.section = p_section and s.state = 'open' and s.access = 'none'
           and not exists (select 1 from seat_pins p where p.seat_id = s.id and p.live)
    )
    select count(*)::int from free f
     where not exists (select 1 from free g where g.run = f.run and g.pos in (f.pos - 1, f.pos + 1))
$$;

-- A grant's seats are next to each other: one run, consecutive positions.
create function seatbench.together(p_hold uuid)
returns boolean
language sql stable as $$
    select count(distinct s.run) = 1 and max(s.pos) - min(s.pos) + 1 = count(*)
      from seat_pins p join seats s on s.id = p.seat_id
     where p.hold_id = p_hold and p.live
$$;

-- A general-admission tier beside the seats (a plain resource of `p_total`
-- units, a ticket of the hall), and one shopper's checkout of it through
-- hf_start_checkouts (units, no seats): the race's yardstick.
create function seatbench.ga(p_id text, p_collection text, p_total integer)
returns void
language sql as $$
    select 1 from hf_upsert_resource(p_id, p_total);
    insert into products (id, resource_id, kind, name, price_minor, currency, collection,
                          max_per_order)
    values (p_id, p_id, 'ticket', initcap(p_id), 2000, 'eur', p_collection, 100);
$$;

create function seatbench.ga_checkout(p_id text, p_qty integer)
returns text
language plpgsql as $$
declare
    v_status text;
begin
    select c.status into v_status
      from hf_start_checkouts(jsonb_build_array(
               seatbench.one(p_id, p_qty, null, p_seated => false))) c;
    insert into seatbench.answers (section, status) values (p_id, v_status);
    return v_status;
end;
$$;

-- `p_n` shoppers' checkouts of one section in one call, as the combiner
-- sends a batch: each asks for the best `p_qty` together. Answers how many
-- started and were refused, seats granted twice (from the answers), and
-- the call's milliseconds (before the commit).
create function seatbench.checkout_batch(p_section text, p_n integer, p_qty integer)
returns table (started bigint, refused bigint, twice bigint, ms numeric)
language plpgsql as $$
declare
    v_batch jsonb := (select jsonb_agg(seatbench.one(p_section, p_qty, null))
                        from generate_series(1, p_n));
    v_t0 timestamptz := clock_timestamp();
    v_ms numeric;
begin
    create temporary table batch_answers on commit drop as
    select c.status, c.hold_id from hf_start_checkouts(v_batch) c;
    v_ms := round(extract(epoch from clock_timestamp() - v_t0) * 1000, 1);
    alter table batch_answers add column seats text[];
    update batch_answers set seats = seatbench.pinned(hold_id) where status = 'started';
    insert into seatbench.answers (section, status, seats)
    select p_section, a.status, a.seats from batch_answers a;
    return query
        select count(*) filter (where a.status = 'started'), count(*) filter (where a.status <> 'started'),
               (select count(*) from (select s from batch_answers b, unnest(b.seats) s
                                       where b.status = 'started' group by s having count(*) > 1) d),
               v_ms
          from batch_answers a;
end;
$$;

-- One step of the churn (bench/seats-race-churn.sql): at random, a shopper
-- asks for the best 1 to 4 (mostly together, 40 %) or names 2 seats (15 %),
-- a live hold is released (25 %), made due (8 %) or paid for (2 %), or
-- staff block or open a seat (10 %). What
-- each step may refuse is an answer, not an error: the invariants are
-- checked after the churn (bench/seats-db).
create function seatbench.churn(p_section text)
returns text
language plpgsql as $$
declare
    v_roll double precision := random();
    v_hold uuid;
    v_label text;
    v_rows integer := (select max(row_rank) from seats where section = p_section);
    v_n integer;
begin
    if v_roll < 0.40 then
        return (select status from seatbench.checkout(p_section, 1 + floor(random() * 4)::int, null,
                                                       random() < 0.8));
    elsif v_roll < 0.55 then
        v_n := 1 + floor(random() * 19)::int;
        v_label := 'R' || (1 + floor(random() * v_rows)::int);
        return (select status from seatbench.checkout(
                    p_section, 2, v_label || '-' || v_n || ',' || v_label || '-' || (v_n + 1)));
    end if;
    select h.id into v_hold from holds h
     where h.resource_id = p_section and h.state = 'held'
     order by random() limit 1;
    if v_roll < 0.90 and v_hold is null then
        return 'no hold';
    elsif v_roll < 0.80 then
        return coalesce((hf_release(v_hold)).status, 'nothing to release');
    elsif v_roll < 0.88 then
        perform seatbench.due(v_hold);
        return 'made due';
    elsif v_roll < 0.90 then
        return coalesce((hf_confirm(v_hold, 'pay-' || v_hold)).status, 'nothing to pay');
    end if;
    v_label := 'R' || (1 + floor(random() * v_rows)::int) || '-' || (1 + floor(random() * 20)::int);
    return (select s.status from hf_seat_set_state(
                p_section, array[v_label],
                case when random() < 0.5 then 'blocked' else 'open' end, 'churn') s);
end;
$$;

-- A section's plan of `p_rows` rows R1, R2, … of 20 seats with an aisle
-- after 10, through hf_seat_plan (as the catalogue will load one).
create function seatbench.plan(p_section text, p_rows integer)
returns void
language sql as $$
    select 1 from hf_seat_plan(p_section, (
        select jsonb_agg(jsonb_build_object('row', 'R' || r, 'rank', r, 'seats', jsonb_build_array(1, 20),
                                            'aisles_after', jsonb_build_array(10)))
          from generate_series(1, p_rows) r));
$$;
