-- API keys (src/staff/api_keys.rs): what the shop's other systems sign the
-- JSON API's requests with. An owner makes one in the admin with scopes;
-- its token (hf_<id>_<secret>) is shown once, and only the SHA-256 of its
-- secret part is kept (256 random bits: nothing slower is needed). A
-- revoked key keeps its row, for everything Activity says it did.
create table api_keys (
    id            text primary key,
    name          text not null,
    scopes        text[] not null,
    secret_hash   bytea not null,
    created_by    text not null,
    created_at    timestamptz not null default now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz,
    revoked_by    text,

    constraint api_key_id_shape check (id ~ '^[a-f0-9]{12}$'),
    constraint api_key_name_shape check (length(name) between 1 and 100),
    constraint api_key_scopes check (cardinality(scopes) between 1 and 10),
    constraint api_key_hash_shape check (length(secret_hash) = 32),
    constraint api_key_revoked_by check ((revoked_at is null) = (revoked_by is null))
);

-- what keys do is recorded with the staff's actions (the key is the
-- operator: "api key <id> (<name>)"); add to the list as it is now
do $$
declare
    v_def text;
begin
    select pg_get_constraintdef(oid) into v_def
      from pg_constraint where conname = 'staff_action_known' and conrelid = 'staff_actions'::regclass;
    execute 'alter table staff_actions drop constraint staff_action_known';
    execute 'alter table staff_actions add constraint staff_action_known '
            || replace(v_def, 'ARRAY[',
                       'ARRAY[''add_api_key''::text, ''revoke_api_key''::text, '
                       || '''api_refused''::text, ''api_checkout''::text, '
                       || '''add_voucher''::text, ''archive_voucher''::text, ');
end;
$$;
