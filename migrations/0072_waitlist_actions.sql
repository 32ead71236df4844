-- The staff's actions on the waiting list and the drop queue, as Activity
-- names them: the rules of a product's line, and turning its queue on.
do $$
declare
    v_def text;
begin
    select pg_get_constraintdef(oid) into v_def
      from pg_constraint where conname = 'staff_action_known' and conrelid = 'staff_actions'::regclass;
    execute 'alter table staff_actions drop constraint staff_action_known';
    execute 'alter table staff_actions add constraint staff_action_known '
            || replace(v_def, 'ARRAY[', 'ARRAY[''waitlist_rules''::text, ''turn_queue_on''::text, ');
end;
$$;
