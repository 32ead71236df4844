-- hf_webhook_event wrote the jobs of enabled and of disabled endpoints in
-- two statements, each with its own snapshot: an endpoint disabled between
-- them got both jobs, whose one dedupe key failed the transaction that
-- decided the event (a payment, a refund); one enabled between them got
-- none. One statement now, one snapshot, one job per endpoint (found in
-- review of 0074).
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
    -- a disabled endpoint's job is kept for a replay: done, never sent
    with queued as (
        insert into outbox_jobs (kind, dedupe_key, payload, state, done_at, last_error)
        select 'webhook', 'webhook:' || e.id || ':' || v_id,
               case when e.disabled_at is null
                    then jsonb_build_object('endpoint_id', e.id, 'message_id', v_id)
                    else jsonb_build_object('endpoint_id', e.id, 'message_id', v_id,
                                            'while_disabled', true) end,
               case when e.disabled_at is null then 'pending' else 'done' end,
               case when e.disabled_at is null then null else now() end,
               case when e.disabled_at is null then null
                    else 'not sent: the endpoint was disabled' end
          from webhook_endpoints e
         where p_type = any (e.events)
         order by e.id
        returning state)
    select count(*) filter (where state = 'pending') into v_queued from queued;
    return v_queued;
end;
$$;

-- Deliveries carry shoppers' names and e-mails, so a public endpoint must
-- be https:// (src/outgoing/address.rs). One registered before that rule
-- would fail every delivery from now on; it is disabled now instead, with
-- the reason on the Webhooks page, and its events kept for a replay.
update webhook_endpoints
   set disabled_at = now(),
       disabled_reason = 'its URL is plain http://: webhooks carry shoppers'' names and e-mails, '
                         || 'so they go only over https://; add the endpoint again with https:// '
                         || '(or, for a receiver on the shop''s own network, with --allow-private)'
 where url like 'http://%' and not allow_private and disabled_at is null;
