-- Issue 36: the chooser sees the evening, and a room may hold its tables
-- for parties that fill them (docs/design.md, "Tables: a party at a
-- time").
--
-- 1. Time lost. A stay that leaves a gap on its table shorter than the
--    shortest turn the table can take (before it, back to the booking
--    before or the first time of its service period that day; after it,
--    up to the next booking of the period) leaves time no party can use.
--    Among the smallest free tables that fit, the one whose stay loses the
--    least such time goes first (then, as before, the least idle time
--    beside its neighbours, the priority, the name). The time lost is
--    counted as what the stay adds: a gap already too short for a turn
--    before it is not counted again.
--
-- 2. Holding tables for fuller parties (`dining_rooms.least_fill`, a
--    percentage, 0: off, the default). A booking must use at least that
--    share of the seat-time it takes: its party times its turn, against
--    the set's largest party times the turn plus the time it loses. At 66
--    (two thirds) a party of one does not take a two-top, a party of four
--    takes a six-top (4/6), a couple does not take a two-top where its
--    stay leaves an hour and a quarter before it that no turn fits. A
--    party no table takes so is refused as when no table is free, and the
--    times the page and the API offer say the same (`hf_bookable_times`
--    reads this function). Staff moving a booking (`p_except` given) are
--    never held back.

alter table dining_rooms
    add column least_fill integer not null default 0,
    add constraint dining_room_least_fill check (least_fill between 0 and 100);

-- Minutes of an interval.
create function hf_minutes(p interval) returns numeric
language sql immutable as $$
    select extract(epoch from p) / 60;
$$;

-- The minutes of a gap no turn of `p_shortest` minutes or more can use:
-- what is left after the turns that fit in it (all of it when none fits;
-- none for a gap without an end).
create function hf_gap_lost(p_gap interval, p_shortest integer) returns numeric
language sql immutable as $$
    select coalesce(mod(hf_minutes(p_gap), p_shortest), 0);
$$;

create or replace function hf_free_sets(p_room text, p_party integer, p_during tstzrange, p_except uuid)
returns table (set_id text, tables text[], max_party integer, joined boolean, idle interval,
               priority integer)
language sql stable as $$
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
                              and p.hold_id is distinct from p_except)
    ), gaps as (
        -- per table of a set: the end of the stay before (or the period's
        -- first time) and the start of the next one in the period
        select f.set_id, f.joined, f.shortest, x.id,
               greatest((select max(upper(p.during)) from table_pins p
                          where p.room = p_room and p.table_id = x.id and p.live
                            and p.hold_id is distinct from p_except
                            and upper(p.during) <= lower(p_during)),
                        (select opens from period)) as before,
               (select min(lower(p.during)) from table_pins p
                 where p.room = p_room and p.table_id = x.id and p.live
                   and p.hold_id is distinct from p_except
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
$$;
