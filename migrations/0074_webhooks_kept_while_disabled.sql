-- An event that happens while an endpoint is disabled is kept for it, not
-- lost: a delivery job written as done and never sent (`while_disabled` in
-- its payload), so "replay every event since" from the admin, once the
-- receiver is mended and the endpoint enabled, sends it with the rest
-- (docs/integrations.md). Before, a disabled endpoint got no job at all,
-- and the events of its dark days could never reach it.
create or replace function hf_webhook_event(p_type text, p_data jsonb) returns integer
language plpgsql as $$
declare
    v_id     text;
    v_queued integer;
begin
    -- nobody listens, enabled or not: nothing is written
    if not exists (select 1 from webhook_endpoints where p_type = any (events)) then
        return 0;
    end if;
    v_id := 'msg_' || replace(gen_random_uuid()::text, '-', '');
    insert into webhook_messages (id, event_type, payload)
    values (v_id, p_type,
            jsonb_build_object(
                'type', p_type,
                'timestamp', to_char(clock_timestamp() at time zone 'utc',
                                     'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                'data', p_data));
    insert into outbox_jobs (kind, dedupe_key, payload)
    select 'webhook', 'webhook:' || e.id || ':' || v_id,
           jsonb_build_object('endpoint_id', e.id, 'message_id', v_id)
      from webhook_endpoints e
     where e.disabled_at is null and p_type = any (e.events)
     order by e.id;
    get diagnostics v_queued = row_count;
    insert into outbox_jobs (kind, dedupe_key, payload, state, done_at, last_error)
    select 'webhook', 'webhook:' || e.id || ':' || v_id,
           jsonb_build_object('endpoint_id', e.id, 'message_id', v_id, 'while_disabled', true),
           'done', now(), 'not sent: the endpoint was disabled'
      from webhook_endpoints e
     where e.disabled_at is not null and p_type = any (e.events)
     order by e.id;
    return v_queued;
end;
$$;
