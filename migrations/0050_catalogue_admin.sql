-- The catalogue and vouchers in the admin: the actions staff take there are
-- recorded in Activity like every other. The known actions are read from
-- the constraint as it stands (other migrations add their own) and these
-- are added to them, so this migration keeps whatever came before it.
do $$
declare
    v_known text[];
begin
    select array_agg(distinct m[1]) into v_known
      from pg_constraint c
     cross join lateral regexp_matches(pg_get_constraintdef(c.oid), '''([a-z_]+)''', 'g') as m
     where c.conrelid = 'staff_actions'::regclass and c.conname = 'staff_action_known';
    select array_agg(distinct k order by k) into v_known
      from unnest(v_known || array[
               'save_event', 'save_tier', 'save_schedule', 'save_stock',
               'archive_product', 'archive_collection', 'create_voucher', 'archive_voucher'
           ]) k;
    alter table staff_actions drop constraint staff_action_known;
    -- written back in the form 0040 writes (and PostgreSQL shows as
    -- ARRAY[...]), so a later migration reads it the same way
    execute format('alter table staff_actions add constraint staff_action_known '
                   'check (action in (%s))',
                   (select string_agg(quote_literal(k), ', ' order by k) from unnest(v_known) k));
end
$$;
