-- The JSON API's Idempotency-Key (src/routes/api/): a POST's key, per API
-- key, with the SHA-256 of the body it came with and, once answered, the
-- answer. The same key with the same body gets the same answer; with
-- another body, 422 and nothing done.
create table api_idempotency (
    api_key_id       text not null references api_keys (id),
    idempotency_key  text not null,
    request_hash     bytea not null,
    status           integer,
    response         jsonb,
    created_at       timestamptz not null default now(),
    primary key (api_key_id, idempotency_key),

    constraint api_idempotency_key_shape check (idempotency_key ~ '^[A-Za-z0-9_-]{1,64}$'),
    constraint api_idempotency_hash_shape check (length(request_hash) = 32),
    constraint api_idempotency_answered check ((status is null) = (response is null))
);
