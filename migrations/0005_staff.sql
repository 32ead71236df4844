-- Holdfast staff: accounts, their sessions, the login throttle and the
-- record of every action staff take in the admin.

create table staff (
    id             bigint generated always as identity primary key,
    -- stored lower-cased; one account per address
    email          text not null unique,
    -- argon2id, PHC string format (algorithm, parameters, salt and hash)
    password_hash  text not null,
    created_at     timestamptz not null default now(),
    updated_at     timestamptz not null default now(),

    constraint staff_email_shape check (
        email = lower(email) and length(email) between 3 and 254 and email like '_%@_%'
    ),
    constraint staff_hash_argon2id check (password_hash like '$argon2id$%')
);

-- A signed-in browser. The cookie carries a random id (signed); only its
-- SHA-256 is stored, so a copy of this table opens no session.
create table staff_sessions (
    id_hash     bytea primary key,
    staff_id    bigint not null references staff (id) on delete cascade,
    -- every admin form carries this token; a form from elsewhere cannot
    csrf_token  text not null,
    created_at  timestamptz not null default now(),
    expires_at  timestamptz not null,

    constraint session_id_hash_shape check (length(id_hash) = 32),
    constraint session_csrf_shape check (length(csrf_token) >= 32)
);
create index staff_sessions_expiry on staff_sessions (expires_at);

-- Failed logins per address typed (whether or not such staff exist, so the
-- answer never tells). Slowed after a few; refused for a while after more.
create table login_throttle (
    key                text primary key,
    -- attempts in the current window, counted before the password is checked
    attempts           integer not null default 0,
    window_started_at  timestamptz not null default now(),
    locked_until       timestamptz,

    constraint throttle_key_shape check (length(key) between 1 and 254),
    constraint throttle_attempts_non_negative check (attempts >= 0)
);

-- What staff did, and what came of it. Append-only, like hold_events.
create table staff_actions (
    id          bigint generated always as identity primary key,
    staff_id    bigint not null references staff (id),
    action      text not null,
    -- what it was done to: a hold id, a resource id, a job id
    target      text not null,
    -- what came of it: released, refused, repaired, …
    outcome     text not null,
    detail      jsonb not null default '{}',
    at          timestamptz not null default now(),

    constraint staff_action_known check (action in (
        'login', 'logout', 'release_hold', 'set_capacity', 'repair_resource', 'retry_refund'
    ))
);
create index staff_actions_recent on staff_actions (at desc);

create function staff_actions_append_only() returns trigger
language plpgsql as $$
begin
    raise exception 'staff_actions is append-only: % refused', tg_op
        using errcode = 'restrict_violation';
end;
$$;

create trigger staff_actions_append_only
    before update or delete or truncate on staff_actions
    for each statement execute function staff_actions_append_only();
