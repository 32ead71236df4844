-- How a section chooses "the best seats together" (docs/design.md,
-- "Reserved seating"), as a dining room's `chooser` says how it picks a
-- table: `best`, the shipped rules (fewest orphans, then the row nearest
-- the stage, then the middle of the house), or `first_fit`, the first
-- stretch long enough from the stage, in the plan's order (row, run, seat):
-- the baseline bench/seats measures the orphans it leaves against.
alter table seat_sections add column chooser text not null default 'best';
alter table seat_sections add constraint seat_section_chooser_known
    check (chooser in ('best', 'first_fit'));

-- hf_seat_best as 0180's, with the section's chooser: first fit takes the
-- first `p_qty` free standard seats of the first stretch that has them.
-- Reads only: the caller holds the section's lock.
create or replace function hf_seat_best(p_section text, p_qty integer, p_exclude bigint[])
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
    if (select chooser from seat_sections where product_id = p_section) = 'first_fit' then
        with free as (
            select s.id, s.row_rank, s.run, s.pos,
                   s.pos - row_number() over (partition by s.run order by s.pos) as grp
              from seats s
             where s.section = p_section and s.state = 'open' and s.access = 'none'
               and s.id not in (select unnest(coalesce(p_exclude, '{}')))
               and not exists (select 1 from seat_pins p where p.seat_id = s.id and p.live)
        ), way as (
            select f.run, f.row_rank, f.pos as first,
                   lead(f.pos, p_qty - 1) over (partition by f.run, f.grp order by f.pos) as last
              from free f
        ), pick as (
            select * from way where last is not null order by row_rank, run, first limit 1
        )
        select array_agg(f.id order by f.pos) into v_ids
          from free f, pick w
         where f.run = w.run and f.pos between w.first and w.last;
        return v_ids;
    end if;
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
