-- Exports: orders and attendees as CSV, and the door's printable list
-- (src/staff/exports.rs). Each is recorded in Activity like every action:
-- export_orders, export_attendees, door_list.
--
-- The names are added to whatever staff_action_known allows by now, read
-- from the constraint itself, rather than by writing the whole list out as
-- 0018 did: migrations written alongside this one (0019 to 0039) add names
-- of their own, and a list written here would take theirs away again.
do $$
declare
    v_known text[];
begin
    -- the constraint reads: check (action = any (array['login'::text, ...]))
    select array_agg(distinct m[1] order by m[1])
      into v_known
      from pg_constraint c
     cross join lateral regexp_matches(pg_get_constraintdef(c.oid), '''([^'']+)''::text', 'g') as m
     where c.conrelid = 'staff_actions'::regclass and c.conname = 'staff_action_known';
    if v_known is null or not v_known @> array['login', 'refused'] then
        raise exception 'staff_action_known is not the list of names it should be: %', v_known;
    end if;
    alter table staff_actions drop constraint staff_action_known;
    -- written back in the same form, so a later migration can read it so too
    execute format(
        'alter table staff_actions add constraint staff_action_known check (action in (%s))',
        (select string_agg(quote_literal(name), ', ' order by name)
           from (select distinct unnest(v_known || array['export_orders', 'export_attendees',
                                                         'door_list']) as name) names));
end;
$$;
