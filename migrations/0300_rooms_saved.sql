-- Staff make a dining room and change its set-up from the admin
-- (src/routes/tables/setup.rs): the action is added to those the log
-- knows, whatever other migrations have added before.
do $$
declare
    v_def text;
begin
    select pg_get_constraintdef(oid) into v_def
      from pg_constraint where conname = 'staff_action_known' and conrelid = 'staff_actions'::regclass;
    execute 'alter table staff_actions drop constraint staff_action_known';
    execute 'alter table staff_actions add constraint staff_action_known '
            || replace(v_def, 'ARRAY[', 'ARRAY[''save_dining_room''::text, ');
end;
$$;
