-- The owner orders the shop's sections (issue 37): moving an event,
-- schedule or shelf up or down the page is recorded in Activity; add its
-- action to the list as it is.
do $$
declare
    v_def text;
begin
    select pg_get_constraintdef(oid) into v_def
      from pg_constraint where conname = 'staff_action_known' and conrelid = 'staff_actions'::regclass;
    execute 'alter table staff_actions drop constraint staff_action_known';
    execute 'alter table staff_actions add constraint staff_action_known '
            || replace(v_def, 'ARRAY[', 'ARRAY[''move_collection''::text, ');
end;
$$;
