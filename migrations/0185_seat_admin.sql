-- The owner's seat plan in the admin (docs/design.md, "Reserved seating",
-- "The seat plan in the admin"): staff block, unblock, hold back and
-- release seats through hf_seat_set_state, now told which states a seat
-- may leave (`p_from`): unblocking puts back blocked seats and releasing
-- seats held back, so a camera position ticked by mistake among the
-- sponsors' seats is refused by name rather than sold. A seat off the
-- plan (kept, blocked, because a ticket once named it) is not one staff
-- can name, and its note is the plan's own. As before: in the section's
-- lock, a seat held or sold is refused (named) and nothing changes, and
-- the section's total follows its seats on sale.

drop function hf_seat_set_state(text, text[], text, text);

create function hf_seat_set_state(p_section text, p_labels text[], p_state text, p_note text,
                                  p_from text[] default null)
returns table (status text, changed integer, refused text[], total integer)
language plpgsql as $$
declare
    v_section seat_sections;
    v_refused text[];
    v_unknown text[];
    v_wrong text[];
    v_changed integer;
    v_total integer;
    v_now timestamptz := clock_timestamp();
begin
    select * into v_section from seat_sections where product_id = p_section;
    if not found then
        perform hf_bad_input(format('%s is not a seated section', p_section));
    end if;
    if p_state is null or p_state not in ('open', 'blocked', 'held_back') then
        perform hf_bad_input('a seat is open, blocked or held_back');
    end if;
    if p_labels is null or cardinality(p_labels) not between 1 and 10000 then
        perform hf_bad_input('name 1 to 10,000 seats');
    end if;
    if p_note is null or length(p_note) > 200 then
        perform hf_bad_input('a note is at most 200 characters');
    end if;
    if p_state <> 'open' and p_note = 'off the plan' then
        perform hf_bad_input('"off the plan" is the plan''s own note: give another');
    end if;
    if p_from is not null and not p_from <@ array['open', 'blocked', 'held_back'] then
        perform hf_bad_input('a seat is open, blocked or held_back');
    end if;
    -- lock: the section
    perform 1 from resources where id = v_section.resource_id for no key update;
    select array_agg(l order by l) into v_unknown
      from unnest(p_labels) l
     where not exists (select 1 from seats s where s.section = p_section and s.label = l
                                              and s.note <> 'off the plan');
    if v_unknown is not null then
        return query select 'unknown', 0, v_unknown, null::integer;
        return;
    end if;
    -- a seat in a state the action does not change from (unblocking a
    -- seat held back): refused, named, nothing changed
    if p_from is not null then
        select array_agg(s.label order by s.row_rank, s.run, s.pos) into v_wrong
          from seats s
         where s.section = p_section and s.label = any (p_labels)
           and s.state <> p_state and s.state <> all (p_from);
        if v_wrong is not null then
            return query select 'wrong_state', 0, v_wrong, null::integer;
            return;
        end if;
    end if;
    if p_state <> 'open' then
        -- what is set aside for the line is given back first: only a
        -- shopper's seat is refused
        perform hf_release_aside(v_section.resource_id, v_now);
        perform hf_seat_expire_due(v_section.resource_id);
        select array_agg(s.label order by s.row_rank, s.run, s.pos) into v_refused
          from seats s
         where s.section = p_section and s.label = any (p_labels) and s.state <> p_state
           and exists (select 1 from seat_pins p where p.seat_id = s.id and p.live);
        if v_refused is not null then
            perform hf_hand_over(v_section.resource_id, v_now);
            return query select 'refused', 0, v_refused, null::integer;
            return;
        end if;
    end if;
    update seats s set state = p_state, note = case when p_state = 'open' then '' else p_note end
     where s.section = p_section and s.label = any (p_labels)
       and (s.state <> p_state
            or s.note <> case when p_state = 'open' then '' else p_note end);
    get diagnostics v_changed = row_count;
    select count(*)::int into v_total from seats s where s.section = p_section and s.state = 'open';
    perform 1 from hf_upsert_resource(v_section.resource_id, v_total);
    perform hf_hand_over(v_section.resource_id, v_now);
    return query select 'changed', v_changed, null::text[], v_total;
end;
$$;

-- What staff do to a seat plan is recorded (src/staff/seats.rs): the
-- actions are added to those the log knows, whatever other migrations
-- have added before.
do $$
declare
    v_def text;
begin
    select pg_get_constraintdef(oid) into v_def
      from pg_constraint where conname = 'staff_action_known' and conrelid = 'staff_actions'::regclass;
    execute 'alter table staff_actions drop constraint staff_action_known';
    execute 'alter table staff_actions add constraint staff_action_known '
            || replace(v_def, 'ARRAY[', 'ARRAY[''seat_block''::text, ''seat_unblock''::text, '
                                        '''seat_hold_back''::text, ''seat_release''::text, '
                                        '''seat_plan''::text, ''seat_section_category''::text, '
                                        '''seat_category''::text, ''seat_splits''::text, ');
end;
$$;
