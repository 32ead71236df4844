-- Bringing back what was archived (issue 37): an event, schedule or shelf
-- with what was archived with it, a product on its own, a voucher. Each
-- restore is recorded in Activity; add its actions to the list as it is.
do $$
declare
    v_def text;
begin
    select pg_get_constraintdef(oid) into v_def
      from pg_constraint where conname = 'staff_action_known' and conrelid = 'staff_actions'::regclass;
    execute 'alter table staff_actions drop constraint staff_action_known';
    execute 'alter table staff_actions add constraint staff_action_known '
            || replace(v_def, 'ARRAY[',
                       'ARRAY[''restore_collection''::text, ''restore_product''::text, '
                       || '''restore_voucher''::text, ');
end;
$$;
