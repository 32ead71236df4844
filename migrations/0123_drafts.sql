-- Draft and published (issue 37): a new event, schedule or stock item
-- starts as a draft, which the shop, its JSON API and its checkout never
-- see, until staff publish it. A draft is a flag on the collection (an
-- event, a schedule: all its tiers or slots with it) or on the product (a
-- stock item). Everything that sells reads `products.active`, so the rule
-- is kept there: no product of a draft, or in a draft collection, is ever
-- active, whoever writes it (a save, a schedule publishing its slots, a
-- restore, the catalogue file).
alter table collections add column draft boolean not null default false;
alter table products add column draft boolean not null default false;

create function hf_draft_not_on_sale() returns trigger
language plpgsql as $$
begin
    if new.active and (new.draft or exists (
        select 1 from collections c where c.id = new.collection and c.draft)) then
        new.active := false;
    end if;
    return new;
end;
$$;

create trigger products_draft_not_on_sale
    before insert or update of active, draft, collection on products
    for each row execute function hf_draft_not_on_sale();

do $$
declare
    v_def text;
begin
    select pg_get_constraintdef(oid) into v_def
      from pg_constraint where conname = 'staff_action_known' and conrelid = 'staff_actions'::regclass;
    execute 'alter table staff_actions drop constraint staff_action_known';
    execute 'alter table staff_actions add constraint staff_action_known '
            || replace(v_def, 'ARRAY[', 'ARRAY[''publish''::text, ''unpublish''::text, ');
end;
$$;
