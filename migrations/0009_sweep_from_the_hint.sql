-- Holdfast: expiry scans start at the hint. An expired hold leaves the
-- partial due-indexes only when vacuum runs, so until then every scan from
-- the start of a resource's range walks past the holds expired before it.
-- A sweep of many due holds goes in chunks, each chunk walked past every
-- earlier chunk's holds while it held the resource's lock: a pass of N
-- chunks cost N² and stalled the resource under 1-second TTLs for most of
-- a second. The hints next_expiry and next_deadline are never late, so a
-- scan may start at them; and after a chunk, whatever is still due lies at
-- or past the last hold it expired. A chunk that finds nothing from the
-- hint recounts the hint from the start of the range: a resource due by its
-- hint with nothing due past it is how a hint made late by a hand-written
-- update shows, and the next pass puts it right. (Recounting from the start
-- after every pass would walk all the dead entries left since the last
-- vacuum, every second under churn.)

create or replace function hf_expire_due_plain(p_resource text, p_now timestamptz, p_actor text, p_limit integer,
                                               out expired_holds integer, out expired_qty integer)
language plpgsql as $$
declare
    v_from timestamptz;
    v_last timestamptz;
begin
    -- the caller holds the resource's lock: the hint cannot move under us
    select next_expiry into v_from from resources where id = p_resource;
    with due as (
        select id from holds
         where resource_id = p_resource and state = 'held'
           and expires_at >= coalesce(v_from, '-infinity') and expires_at <= p_now
         order by expires_at
         limit p_limit
    ), done as (
        update holds h
           set state = 'expired', ended_at = p_now, ended_by = p_actor, end_reason = 'ttl'
          from due
         where h.id = due.id
        returning h.id, h.qty, h.expires_at
    ), logged as (
        insert into hold_events (hold_id, kind, from_state, to_state, actor, detail)
        select id, 'expired', 'held', 'expired', p_actor, '{"reason": "ttl"}'::jsonb from done
    )
    select count(*)::integer, coalesce(sum(qty), 0)::integer, max(expires_at)
      into expired_holds, expired_qty, v_last
      from done;

    update resources
       set held = held - expired_qty,
           -- from where this chunk ended; when it found nothing, from the
           -- start, so a hint made late by a hand-written update heals on the
           -- next pass
           next_expiry = (select min(expires_at) from holds
                       where resource_id = p_resource and state = 'held'
                         and expires_at >= coalesce(v_last, '-infinity')),
           updated_at = p_now
     where id = p_resource;
end;
$$;

create or replace function hf_expire_due_paying(p_resource text, p_now timestamptz, p_actor text, p_limit integer,
                                                out expired_holds integer, out expired_qty integer)
language plpgsql as $$
declare
    v_from timestamptz;
    v_last timestamptz;
begin
    select next_deadline into v_from from resources where id = p_resource;
    with due as (
        select id from holds
         where resource_id = p_resource and state = 'awaiting_payment'
           and payment_deadline >= coalesce(v_from, '-infinity') and payment_deadline <= p_now
         order by payment_deadline
         limit p_limit
    ), done as (
        update holds h
           set state = 'expired', ended_at = p_now, ended_by = p_actor, end_reason = 'payment_deadline'
          from due
         where h.id = due.id
        returning h.id, h.qty, h.payment_deadline
    ), logged as (
        insert into hold_events (hold_id, kind, from_state, to_state, actor, detail)
        select id, 'expired', 'awaiting_payment', 'expired', p_actor,
               '{"reason": "payment_deadline"}'::jsonb from done
    )
    select count(*)::integer, coalesce(sum(qty), 0)::integer, max(payment_deadline)
      into expired_holds, expired_qty, v_last
      from done;

    update resources
       set held = held - expired_qty,
           -- from where this chunk ended; when it found nothing, from the
           -- start, so a hint made late by a hand-written update heals on the
           -- next pass
           next_deadline = (select min(payment_deadline) from holds
                       where resource_id = p_resource and state = 'awaiting_payment'
                         and payment_deadline >= coalesce(v_last, '-infinity')),
           updated_at = p_now
     where id = p_resource;
end;
$$;
