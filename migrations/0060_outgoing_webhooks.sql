-- Outgoing webhooks (src/outgoing/): endpoints staff register, the events
-- Holdfast sends them (Standard Webhooks), and every attempt to deliver.
--
-- An event is written by the transaction that decided it: the triggers
-- below fire inside the commit that marks an order paid, expired or
-- cancelled, records a refund or a redemption, or takes a product's last
-- unit (or gives one back). Each event is one `webhook_messages` row (its
-- id is the `webhook-id` every delivery of it carries, however often it is
-- retried or replayed) and one outbox job per endpoint that asked for its
-- type (`kind = 'webhook'`, dedupe key `webhook:<endpoint>:<message>`),
-- which the worker delivers after the commit, outside any lock. With no
-- endpoint asking for a type, nothing at all is written.

create table webhook_endpoints (
    id               text primary key,
    url              text not null,
    -- the event types it asked for (src/outgoing/mod.rs names them)
    events           text[] not null,
    -- `whsec_…`'s key, sealed: AES-256-GCM under a key derived from
    -- HOLDFAST_SESSION_KEY, bound to the endpoint's id (nonce ‖ ciphertext ‖
    -- tag), so a copy of the database alone cannot sign
    secret_sealed    bytea not null,
    -- the operator let this one reach a private or loopback address
    -- (`holdfast webhooks add --allow-private`)
    allow_private    boolean not null default false,
    created_by       text not null,
    created_at       timestamptz not null default now(),
    -- an endpoint that failed for days is disabled, with why; staff enable
    -- it again
    disabled_at      timestamptz,
    disabled_reason  text,

    constraint webhook_endpoint_id_shape check (id ~ '^ep_[a-z0-9]{20,40}$'),
    constraint webhook_endpoint_url_shape check (url ~ '^https?://' and length(url) <= 2000),
    constraint webhook_endpoint_events check (cardinality(events) between 1 and 20),
    constraint webhook_endpoint_sealed_shape check (length(secret_sealed) = 12 + 32 + 16),
    constraint webhook_endpoint_disabled_why check ((disabled_at is null) = (disabled_reason is null))
);

create table webhook_messages (
    -- msg_…: the `webhook-id` header
    id          text primary key,
    event_type  text not null,
    -- the body as sent: {"type", "timestamp", "data"}
    payload     jsonb not null,
    created_at  timestamptz not null default now()
);
create index webhook_messages_recent on webhook_messages (created_at);

-- Every try to deliver a message to an endpoint, kept: what it answered
-- (an HTTP status), or why there was no answer.
create table webhook_attempts (
    id           bigint generated always as identity primary key,
    job_id       bigint not null references outbox_jobs (id),
    endpoint_id  text not null references webhook_endpoints (id),
    message_id   text not null references webhook_messages (id),
    at           timestamptz not null default now(),
    status       integer,
    error        text,
    duration_ms  integer not null,

    constraint webhook_attempt_said_something check (status is not null or error is not null)
);
create index webhook_attempts_by_job on webhook_attempts (job_id, id);
create index webhook_attempts_by_endpoint on webhook_attempts (endpoint_id, id desc);
-- an endpoint's deliveries, for the admin and replays
create index outbox_webhooks_by_endpoint on outbox_jobs ((payload ->> 'endpoint_id'), id)
    where kind = 'webhook';

-- Other migrations of this release widen the same lists; add to the list
-- as it is now rather than restate it.
do $$
declare
    v_def text;
begin
    select pg_get_constraintdef(oid) into v_def
      from pg_constraint where conname = 'job_kind_known' and conrelid = 'outbox_jobs'::regclass;
    execute 'alter table outbox_jobs drop constraint job_kind_known';
    execute 'alter table outbox_jobs add constraint job_kind_known '
            || replace(v_def, 'ARRAY[', 'ARRAY[''webhook''::text, ');

    select pg_get_constraintdef(oid) into v_def
      from pg_constraint where conname = 'staff_action_known' and conrelid = 'staff_actions'::regclass;
    execute 'alter table staff_actions drop constraint staff_action_known';
    execute 'alter table staff_actions add constraint staff_action_known '
            || replace(v_def, 'ARRAY[',
                       'ARRAY[''add_webhook''::text, ''enable_webhook''::text, '
                       || '''disable_webhook''::text, ''replay_webhook''::text, ');
end;
$$;

-- One event: a message, and a delivery job for each endpoint that asked
-- for its type. Returns how many deliveries it queued. In the caller's
-- transaction: the event exists exactly when what it reports does.
create function hf_webhook_event(p_type text, p_data jsonb) returns integer
language plpgsql as $$
declare
    v_id     text;
    v_queued integer;
begin
    -- nobody listens: nothing is written
    if not exists (select 1 from webhook_endpoints
                    where disabled_at is null and p_type = any (events)) then
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
    return v_queued;
end;
$$;

-- An order as its events carry it.
create function hf_webhook_order(p_order uuid) returns jsonb
language sql stable as $$
    select jsonb_build_object(
               'id', o.id,
               'token', o.token,
               'state', o.state,
               'amount_minor', o.amount_minor,
               'discount_minor', o.discount_minor,
               'currency', o.currency,
               'provider', o.provider,
               'customer', jsonb_build_object('name', o.customer_name,
                                              'email', o.customer_email),
               'created_at', o.created_at,
               'paid_at', o.paid_at,
               'lines', (select coalesce(jsonb_agg(jsonb_build_object(
                                     'product_id', l.product_id,
                                     'name', l.name,
                                     'qty', l.qty,
                                     'unit_price_minor', l.unit_price_minor,
                                     'paid_minor', coalesce(l.paid_minor,
                                                            l.unit_price_minor * l.qty))
                                     order by l.product_id), '[]'::jsonb)
                           from order_lines l where l.order_id = o.id))
      from orders o where o.id = p_order
$$;

-- order.paid, order.expired, order.cancelled: an order leaving `pending`.
create function hf_webhook_order_state() returns trigger
language plpgsql as $$
begin
    perform hf_webhook_event('order.' || new.state,
                             jsonb_build_object('order', hf_webhook_order(new.id)));
    return null;
end;
$$;
create trigger orders_webhook_state
    after update of state on orders
    for each row
    when (old.state = 'pending' and new.state in ('paid', 'expired', 'cancelled'))
    execute function hf_webhook_order_state();

-- order.refunded: staff refunded some units or the whole order (the money
-- goes back through the outbox after this commit). `whole`: no unit of the
-- order is left unrefunded.
create function hf_webhook_order_refunded() returns trigger
language plpgsql as $$
declare
    v_refunded bigint;
    v_ordered  bigint;
begin
    select coalesce(sum((u ->> 'qty')::bigint), 0) into v_refunded
      from order_refunds r, jsonb_array_elements(r.units) u
     where r.order_id = new.order_id;
    select coalesce(sum(qty), 0) into v_ordered from order_lines where order_id = new.order_id;
    perform hf_webhook_event('order.refunded', jsonb_build_object(
        'order', hf_webhook_order(new.order_id),
        'refund', jsonb_build_object(
            'id', new.id,
            'amount_minor', new.amount_minor,
            'units', new.units,
            'reason', new.reason,
            'restocked', new.restocked,
            'whole', v_refunded >= v_ordered,
            'created_at', new.created_at)));
    return null;
end;
$$;
create trigger order_refunds_webhook
    after insert on order_refunds
    for each row execute function hf_webhook_order_refunded();

-- code.redeemed: a ticket admitted or a pickup collected, once.
create function hf_webhook_code_redeemed() returns trigger
language plpgsql as $$
begin
    perform hf_webhook_event('code.redeemed', jsonb_build_object(
        'code', new.code,
        'kind', new.kind,
        'order_id', new.order_id,
        'order_token', (select token from orders where id = new.order_id),
        'redeemed_at', new.redeemed_at,
        'redeemed_by', new.redeemed_by,
        'place', new.place));
    return null;
end;
$$;
create trigger redemptions_webhook
    after insert on redemptions
    for each row execute function hf_webhook_code_redeemed();

-- product.sold_out, product.available: a resource's last unit taken (held
-- or sold), or one given back. The `when` clause keeps every other change
-- of the counters (almost all of them) free of the trigger.
create function hf_webhook_stock() returns trigger
language plpgsql as $$
declare
    v_left integer := new.total - new.held - new.sold;
    v_product record;
begin
    for v_product in
        select id from products where resource_id = new.id and active order by id
    loop
        perform hf_webhook_event(
            case when v_left > 0 then 'product.available' else 'product.sold_out' end,
            jsonb_build_object('product_id', v_product.id,
                               'resource_id', new.id,
                               'available', greatest(v_left, 0)));
    end loop;
    return null;
end;
$$;
create trigger resources_webhook_stock
    after update of total, held, sold on resources
    for each row
    when ((old.total - old.held - old.sold > 0) <> (new.total - new.held - new.sold > 0))
    execute function hf_webhook_stock();
