-- Staff run their own accounts (src/staff/accounts.rs) and sign in with a
-- second factor (src/staff/two_factor.rs).

-- A disabled account signs in no more and its sessions are gone; the row
-- stays, for everything Activity says it did.
alter table staff add column disabled_at timestamptz;

-- Who acted: a staff member in the admin, or an operator at the command
-- line (`holdfast staff add`), never neither.
alter table staff_actions alter column staff_id drop not null;
alter table staff_actions add column operator text;
alter table staff_actions add constraint staff_action_by_someone
    check ((staff_id is null) <> (operator is null));

-- An authenticator app's secret (RFC 6238). It is sealed: AES-256-GCM under
-- a key derived from HOLDFAST_SESSION_KEY, bound to the account (nonce ‖
-- ciphertext ‖ tag), so a copy of the database alone does not give it
-- away. A row without `confirmed_at` is an enrolment not yet confirmed by a
-- code from the app; two-factor is on from `confirmed_at`.
create table staff_two_factor (
    staff_id       bigint primary key references staff (id),
    secret_sealed  bytea not null,
    confirmed_at   timestamptz,
    -- the last 30-second step a code was accepted for: a code of that step
    -- or an earlier one is refused, so a code is used once
    last_step      bigint,
    created_at     timestamptz not null default now(),

    constraint two_factor_sealed_shape check (length(secret_sealed) = 12 + 20 + 16),
    constraint two_factor_step_after_confirming check (confirmed_at is null or last_step is not null)
);

-- One-time recovery codes, for a lost phone: only their SHA-256 is kept
-- (each code has 79 random bits; nothing slower is needed), and a used one
-- keeps its row with the moment it was used.
create table staff_recovery_codes (
    staff_id    bigint not null references staff (id),
    code_hash   bytea not null,
    used_at     timestamptz,
    created_at  timestamptz not null default now(),
    primary key (staff_id, code_hash),

    constraint recovery_code_hash_shape check (length(code_hash) = 32)
);

-- A sign-in between its password and its code. The browser holds a random
-- id (signed, in a cookie); only its SHA-256 is stored. Wrong codes are
-- counted here as well as in the login throttle.
create table staff_login_challenges (
    id_hash      bytea primary key,
    staff_id     bigint not null references staff (id),
    typed_email  text not null,
    csrf_token   text not null,
    wrong_codes  integer not null default 0,
    expires_at   timestamptz not null,

    constraint challenge_id_hash_shape check (length(id_hash) = 32),
    constraint challenge_csrf_shape check (length(csrf_token) >= 32),
    constraint challenge_wrong_codes_non_negative check (wrong_codes >= 0)
);
create index staff_login_challenges_expiry on staff_login_challenges (expires_at);

-- The owner's settings for staff: one row.
create table staff_settings (
    only_row                 boolean primary key default true,
    -- everyone whose role can refund signs in with a second factor
    two_factor_for_refunds   boolean not null default false,
    updated_at               timestamptz not null default now(),

    constraint staff_settings_one_row check (only_row)
);
insert into staff_settings default values;

-- Each account's last sign-in, as the Staff page shows it.
create index staff_actions_logins on staff_actions (staff_id, at desc)
    where action = 'login' and outcome = 'ok';

alter table staff_actions drop constraint staff_action_known;
alter table staff_actions add constraint staff_action_known check (action in (
    'login', 'logout', 'release_hold', 'set_capacity', 'repair_resource', 'retry_refund',
    'refund_order', 'redeem', 'refused',
    'add_staff', 'set_password', 'change_role', 'disable_staff', 'enable_staff',
    'two_factor_on', 'two_factor_off', 'reset_two_factor', 'new_recovery_codes',
    'change_setting'
));
