-- Walk-ins at the host stand (issue 46): a party with no booking, seated
-- now on a free table. Its table is claimed as a booking's is: a live pin
-- on each table of the set, under the same exclusion constraint, so a
-- walk-in and a shopper booking the same table at the same moment cannot
-- both have it, whoever commits first.
--
-- 1. `walk_ins`: who was seated where, from when until when the table is
--    theirs (their party's turn, or less when the table is booked later),
--    and when they left.
-- 2. `table_pins` holds a booking's hold or a walk-in, exactly one.
-- 3. `hf_walk_in_sets`: the tables and joined sets that seat a party now,
--    each with when it is next taken; `hf_walk_in`: seat them, one
--    statement, under the room's lock after its time's counters (the
--    engine's order); `hf_walk_in_left`: the table is free again.
--
-- `hf_move_booking` refuses a booking marked a no-show (read under its
-- locks): the host stand frees a no-show's table from the mark.
--
-- A walk-in writes a counters row of its room's nearest time (no count
-- changes), as a move does, so every process's memory of the room's
-- stays is read again and the crowd is never offered the table.

create table walk_ins (
    id        uuid primary key default hf_uuid_v7(),
    room      text not null references dining_rooms (collection),
    party     integer not null,
    name      text not null default '',
    tables    text[] not null,
    seated_at timestamptz not null,
    -- the end of the table's stay as seated: the party's turn, or the
    -- next booking on the table if that comes first
    until     timestamptz not null,
    left_at   timestamptz,
    seated_by text not null,
    constraint walk_in_party check (party between 1 and 100),
    constraint walk_in_name_shape check (length(name) <= 200),
    constraint walk_in_tables check (cardinality(tables) >= 1),
    constraint walk_in_stay check (until > seated_at),
    constraint walk_in_left_after check (left_at is null or left_at >= seated_at),
    constraint walk_in_says_who check (length(seated_by) between 1 and 254)
);
create index walk_ins_by_room_day on walk_ins (room, seated_at);

alter table table_pins add column walk_in uuid references walk_ins (id);
alter table table_pins drop constraint table_pins_pkey;
alter table table_pins alter column hold_id drop not null;
alter table table_pins add constraint pin_is_a_hold_or_a_walk_in
    check (num_nonnulls(hold_id, walk_in) = 1);
-- a booking's pins by its hold, as before (nulls are distinct: walk-ins'
-- pins never meet here)
create unique index table_pins_hold_table on table_pins (hold_id, table_id);
create unique index table_pins_walk_in_table on table_pins (walk_in, table_id);

-- A walk-in's pin has no hold: the sets free for a stay leave it out as
-- they leave out every live pin but the moved booking's own (`p_except`;
-- `null is distinct from null` is false, so the test names it).
create or replace function hf_free_sets(p_room text, p_party integer, p_during tstzrange, p_except uuid)
 RETURNS TABLE(set_id text, tables text[], max_party integer, joined boolean, idle interval, priority integer)
 LANGUAGE sql
 STABLE
AS $function$
    with room as (
        select chooser, least_fill from dining_rooms where collection = p_room
    ), period as (
        -- the stay's service period that day: its first time, and its
        -- last seating (a period is at most eleven hours here, so the
        -- same period of the day before never counts)
        select coalesce(min(t.starts_at), lower(p_during)) as opens,
               coalesce(min(t.starts_at), lower(p_during))
                 + coalesce(max(pe.last_seating - pe.opens), interval '0') as last_seating
          from dining_times me
          join dining_periods pe on pe.room = me.room and pe.name = me.period
          join dining_times t on t.room = me.room and t.period = me.period
                             and t.starts_at <= me.starts_at
                             and t.starts_at >= me.starts_at
                                 - least(pe.last_seating - pe.opens, interval '11 hours')
         where me.room = p_room and me.starts_at = lower(p_during)
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
        select s.*,
               -- the shortest turn the set can take: its smallest party's
               coalesce((select u.minutes from dining_turns u
                          where u.room = p_room and u.up_to_party >= s.min_party
                          order by u.up_to_party limit 1),
                        (select u.minutes from dining_turns u
                          where u.room = p_room order by u.up_to_party desc limit 1),
                        120) as shortest
          from sets s
         where p_party between s.min_party and s.max_party
           and not exists (select 1 from table_pins p
                            where p.room = p_room and p.table_id = any (s.tables) and p.live
                              and p.during && p_during
                              and (p.hold_id is null or p.hold_id is distinct from p_except))
    ), gaps as (
        -- per table of a set: the end of the stay before (or the period's
        -- first time) and the start of the next one in the period
        select f.set_id, f.joined, f.shortest, x.id,
               greatest((select max(upper(p.during)) from table_pins p
                          where p.room = p_room and p.table_id = x.id and p.live
                            and (p.hold_id is null or p.hold_id is distinct from p_except)
                            and upper(p.during) <= lower(p_during)),
                        (select opens from period)) as before,
               (select min(lower(p.during)) from table_pins p
                 where p.room = p_room and p.table_id = x.id and p.live
                   and (p.hold_id is null or p.hold_id is distinct from p_except)
                   and lower(p.during) >= upper(p_during)
                   and lower(p.during) <= (select last_seating from period)) as after
          from fitting f, unnest(f.tables) as x(id)
    ), lost as (
        -- minutes of a gap no turn can use: what is left over after the
        -- turns that fit in it; the stay's share is what its two gaps
        -- lose beyond what the gap it splits lost already
        select g.set_id, g.joined,
               sum(hf_gap_lost(lower(p_during) - g.before, g.shortest)
                   + hf_gap_lost(g.after - upper(p_during), g.shortest)
                   - hf_gap_lost(g.after - g.before, g.shortest))
                 / count(*) as minutes
          from gaps g
         group by g.set_id, g.joined
    )
    select f.set_id, f.tables, f.max_party, f.joined,
           (select sum(
                   least(coalesce(lower(p_during) - (
                       select max(upper(p.during)) from table_pins p
                        where p.room = p_room and p.table_id = x.id and p.live
                          and (p.hold_id is null or p.hold_id is distinct from p_except)
                          and p.during && tstzrange(lower(p_during) - interval '4 hours', lower(p_during))),
                       interval '4 hours'), interval '4 hours')
                 + least(coalesce((
                       select min(lower(p.during)) from table_pins p
                        where p.room = p_room and p.table_id = x.id and p.live
                          and (p.hold_id is null or p.hold_id is distinct from p_except)
                          and p.during && tstzrange(upper(p_during), upper(p_during) + interval '4 hours'))
                       - upper(p_during), interval '4 hours'), interval '4 hours'))
              from unnest(f.tables) as x(id)) as idle,
           f.priority
      from fitting f
      join lost l on l.set_id = f.set_id and l.joined = f.joined
     cross join room
     where p_except is not null
        or room.least_fill = 0
        -- the party's seat-time against the set's, with the time it loses
        or 100 * p_party * hf_minutes(upper(p_during) - lower(p_during))
           >= room.least_fill * f.max_party
              * (hf_minutes(upper(p_during) - lower(p_during)) + greatest(l.minutes, 0))
     order by case when room.chooser = 'first_fit' then f.position end,
              case when room.chooser = 'first_fit' then f.set_id end,
              f.max_party, f.joined, l.minutes, idle, f.priority, f.set_id;
$function$;

-- The sets that seat a party of `p_party` in the room from `p_now`: free
-- for the first half hour at least, with the next stay on any of their
-- tables within twelve hours (`taken_at`, null when none). The sets free
-- for the party's whole turn come first, then the smallest that fits.
create function hf_walk_in_sets(p_room text, p_party integer, p_now timestamptz)
returns table (set_id text, tables text[], max_party integer, joined boolean,
               turn interval, taken_at timestamptz)
language sql stable
set jit = off
as $$
    with turn as (
        select make_interval(mins => coalesce(
            (select u.minutes from dining_turns u
              where u.room = p_room and u.up_to_party >= p_party
              order by u.up_to_party limit 1),
            (select u.minutes from dining_turns u
              where u.room = p_room order by u.up_to_party desc limit 1),
            120)) as turn
    ), sets as (
        select t.id as set_id, array[t.id] as tables, t.min_party, t.max_party,
               t.priority, false as joined
          from dining_tables t
         where t.room = p_room and t.archived_at is null
        union all
        select j.id, j.tables, j.min_party, j.max_party, j.priority, true
          from dining_joins j
         where j.room = p_room and j.archived_at is null
           and (select count(*) from dining_tables t
                 where t.room = p_room and t.id = any (j.tables) and t.archived_at is null)
               = cardinality(j.tables)
    ), free as (
        select s.*, turn.turn,
               (select min(lower(p.during)) from table_pins p
                 where p.room = p_room and p.table_id = any (s.tables) and p.live
                   and lower(p.during) >= p_now
                   and lower(p.during) < p_now + interval '12 hours') as taken_at
          from sets s, turn
         where p_party between s.min_party and s.max_party
           and not exists (select 1 from table_pins p
                            where p.room = p_room and p.table_id = any (s.tables) and p.live
                              and p.during && tstzrange(p_now, p_now + interval '30 minutes', '[)'))
    )
    select f.set_id, f.tables, f.max_party, f.joined, f.turn, f.taken_at
      from free f
     order by f.taken_at is not null and f.taken_at < p_now + f.turn,
              f.max_party, f.joined, f.priority, f.set_id;
$$;

-- Seat a walk-in party now: at `p_set` (a table or a joined set of the
-- room), or at the first set `hf_walk_in_sets` names when it is null.
-- Answers {"outcome": "seated", "id", "tables", "until"}, or an outcome
-- that seated no one: `unknown_room`, `unknown_set`, `does_not_fit`,
-- `not_free` (taken now or within the half hour), `none_free`.
create function hf_walk_in(p_room text, p_party integer, p_set text, p_name text,
                           p_by text, p_now timestamptz)
returns jsonb
language plpgsql
set jit = off
as $$
declare
    v_set   record;
    v_id    uuid;
    v_until timestamptz;
begin
    if p_party is null or p_party not between 1 and 100 then
        perform hf_bad_input('a party is 1 to 100 guests');
    end if;
    -- lock: the room's nearest time's counters, then the room (the
    -- engine's order); writing the counters row tells memory
    perform 1 from resources r
     where r.id = (select t.resource_id from dining_times t where t.room = p_room
                    order by abs(extract(epoch from t.starts_at - p_now)), t.starts_at
                    limit 1)
       for no key update;
    perform 1 from dining_rooms where collection = p_room and archived_at is null
       for no key update;
    if not found then
        return jsonb_build_object('outcome', 'unknown_room');
    end if;
    if p_set is not null
       and not exists (select 1 from dining_tables where room = p_room and id = p_set and archived_at is null)
       and not exists (select 1 from dining_joins where room = p_room and id = p_set and archived_at is null) then
        return jsonb_build_object('outcome', 'unknown_set');
    end if;
    select f.set_id, f.tables, f.turn, f.taken_at into v_set
      from hf_walk_in_sets(p_room, p_party, p_now)
           with ordinality as f(set_id, tables, max_party, joined, turn, taken_at, n)
     where p_set is null or f.set_id = p_set
     order by f.n
     limit 1;
    if not found then
        if p_set is null then
            return jsonb_build_object('outcome', 'none_free');
        end if;
        if exists (select 1 from dining_tables where room = p_room and id = p_set
                      and p_party between min_party and max_party)
           or exists (select 1 from dining_joins where room = p_room and id = p_set
                         and p_party between min_party and max_party) then
            return jsonb_build_object('outcome', 'not_free');
        end if;
        return jsonb_build_object('outcome', 'does_not_fit');
    end if;
    v_until := least(p_now + v_set.turn, coalesce(v_set.taken_at, 'infinity'));
    insert into walk_ins (room, party, name, tables, seated_at, until, seated_by)
    values (p_room, p_party, coalesce(trim(p_name), ''), v_set.tables, p_now, v_until, p_by)
    returning id into v_id;
    insert into table_pins (walk_in, room, table_id, during)
    select v_id, p_room, x.id, tstzrange(p_now, v_until, '[)') from unnest(v_set.tables) as x(id);
    update resources r set held = r.held
     where r.id = (select t.resource_id from dining_times t where t.room = p_room
                    order by abs(extract(epoch from t.starts_at - p_now)), t.starts_at
                    limit 1);
    return jsonb_build_object('outcome', 'seated', 'id', v_id, 'tables', to_jsonb(v_set.tables),
                              'until', v_until);
end;
$$;

-- A move reads the booking again under its locks: a no-show marked
-- meanwhile (its stay ended at the mark) is not moved, which would give
-- it its whole stay back on the new table.
create or replace function hf_move_booking(p_hold uuid, p_set text)
 RETURNS text
 LANGUAGE plpgsql
AS $function$
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
    -- under the locks: a booking marked a no-show meanwhile has ended
    -- its stay, and a move would give it back
    if not exists (select 1 from table_pins where hold_id = p_hold and live)
       or exists (select 1 from bookings where hold_id = p_hold and no_show_at is not null) then
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
$function$;

-- The walk-in party left: its tables are free from now. Answers `left`,
-- `left_before` or `not_found`.
create function hf_walk_in_left(p_room text, p_id uuid, p_now timestamptz)
returns text
language plpgsql
as $$
declare
    w walk_ins;
begin
    perform 1 from resources r
     where r.id = (select t.resource_id from dining_times t where t.room = p_room
                    order by abs(extract(epoch from t.starts_at - p_now)), t.starts_at
                    limit 1)
       for no key update;
    select * into w from walk_ins where id = p_id and room = p_room for update;
    if not found then
        return 'not_found';
    end if;
    if w.left_at is not null then
        return 'left_before';
    end if;
    update walk_ins set left_at = greatest(p_now, seated_at) where id = p_id;
    update table_pins set live = false where walk_in = p_id and live;
    update resources r set held = r.held
     where r.id = (select t.resource_id from dining_times t where t.room = p_room
                    order by abs(extract(epoch from t.starts_at - p_now)), t.starts_at
                    limit 1);
    return 'left';
end;
$$;
