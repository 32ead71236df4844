-- Holdfast: confirmations in a batch.
--
-- A payment burst on one tier is confirmed in combined transactions
-- (src/checkout/confirmations.rs). Confirmed one call at a time, every
-- payment moved the tier's counters by itself: one new version of the
-- resource row per payment, each update walking the versions the batch had
-- already made. hf_confirm_many decides each purchase
-- exactly as hf_confirm decided it alone, in the order given (each sees
-- what the ones before it did), and moves the counters of the resources
-- it sold once, at the end. hf_confirm is now a batch of one.
--
-- Deferring the move is safe: every other change a confirmation can make
-- to a resource's counters on the way (a purchase found ended gives its
-- held units back) is relative too, no decision in the loop reads held or
-- sold, and the purchase rows it answers carry no availability.

create function hf_confirm_many(p_ids uuid[], p_payment_refs text[], p_actor text default 'payment')
returns setof hold_result
language plpgsql as $$
declare
    i integer;
    v_id uuid;
    v_ref text;
    v_purchase uuid;
    v_now timestamptz;
    v_shape purchase_shape;
    v_ended text;
    v_existing text;
    v_other uuid;
    v_moved integer;
    v_resources text[] := '{}';
    v_qtys integer[] := '{}';
    res hold_result;
begin
    if coalesce(cardinality(p_ids), 0) <> coalesce(cardinality(p_payment_refs), 0) then
        perform hf_bad_input('one payment reference for each purchase');
    end if;

    -- lock: every resource the batch may sell from, ascending id, before
    -- any purchase (each hf_lock_purchase below then finds its own locked),
    -- so a batch over several resources takes them in the order every
    -- other path does
    perform 1 from resources
      where id in (select resource_id from holds
                    where purchase_id in (select purchase_id from holds
                                           where id = any(p_ids) or purchase_id = any(p_ids)))
      order by id
      for no key update;

    for i in 1 .. coalesce(cardinality(p_ids), 0) loop
        v_id := p_ids[i];
        v_ref := p_payment_refs[i];
        if v_ref is null or length(v_ref) not between 1 and 255 then
            perform hf_bad_input('payment reference must be 1 to 255 characters');
        end if;

        v_purchase := hf_lock_purchase(v_id);
        if v_purchase is null then
            res := null;
            res.status := 'not_found';
            res.hold_id := v_id;
            res.payment_ref := v_ref;
            return next res;
            continue;
        end if;
        v_now := clock_timestamp();

        -- Claim the payment reference before anything else: a payment that
        -- bought (or was refused for) another purchase is never answered
        -- with an outcome that would refund it or sell with it here. A
        -- concurrent claim of the same reference waits for that
        -- transaction, then loses. Refused payments keep their claim, so
        -- money that is being refunded can never buy anything later.
        insert into payment_refs (payment_ref, purchase_id) values (v_ref, v_purchase)
        on conflict (payment_ref) do nothing;
        if not found then
            select purchase_id into v_other from payment_refs where payment_ref = v_ref;
            if v_other is distinct from v_purchase then
                return next hf_purchase_row('payment_ref_in_use', v_purchase, v_ref, null, v_other);
                continue;
            end if;
        end if;

        v_shape := hf_purchase_shape(v_purchase, v_now);
        if v_shape.confirmed > 0 then
            select payment_ref into v_existing from holds
             where purchase_id = v_purchase and state = 'confirmed' limit 1;
            if v_existing = v_ref then
                return next hf_purchase_row('already_confirmed', v_purchase, v_ref, null, null);
            else
                return next hf_purchase_row('duplicate_payment', v_purchase, v_ref, v_existing, null);
            end if;
            continue;
        end if;

        -- A released or expired purchase is never revived: the money goes back.
        v_ended := hf_settle_ended(v_purchase, v_shape, v_now);
        if v_ended is not null then
            return next hf_purchase_row(v_ended, v_purchase, v_ref, null, null);
            continue;
        end if;

        with sold as (
            update holds
               set state = 'confirmed', payment_ref = v_ref, confirmed_at = v_now
             where purchase_id = v_purchase and state in ('held', 'awaiting_payment')
            returning id, resource_id, qty, (payment_started_at is not null) as was_paying
        ), logged as (
            insert into hold_events (hold_id, kind, from_state, to_state, actor, detail)
            select id, 'confirmed', case when was_paying then 'awaiting_payment' else 'held' end,
                   'confirmed', p_actor, jsonb_build_object('payment_ref', v_ref)
              from sold
        )
        select v_resources || coalesce(array_agg(resource_id), '{}'),
               v_qtys || coalesce(array_agg(qty), '{}'),
               count(*)
          into v_resources, v_qtys, v_moved
          from sold;
        -- every line of a live purchase moves, or something is badly wrong
        if v_moved = 0 then
            raise exception 'confirm of purchase % moved no holds', v_purchase;
        end if;
        return next hf_purchase_row('confirmed', v_purchase, v_ref, null, null);
    end loop;

    -- what was sold, moved from held to sold: once per resource
    update resources x
       set held = x.held - m.qty, sold = x.sold + m.qty, updated_at = clock_timestamp()
      from (select r, sum(q)::integer as qty from unnest(v_resources, v_qtys) as u(r, q) group by r) m
     where x.id = m.r;
    get diagnostics v_moved = row_count;
    if v_moved <> (select count(distinct r) from unnest(v_resources) as u(r)) then
        raise exception 'a batch of confirmations moved the counters of % of its resources', v_moved;
    end if;
end;
$$;

create or replace function hf_confirm(p_id uuid, p_payment_ref text, p_actor text default 'payment')
returns hold_result
language sql as $$
    select * from hf_confirm_many(array[p_id], array[p_payment_ref], p_actor);
$$;
