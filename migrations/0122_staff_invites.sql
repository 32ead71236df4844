-- Staff are invited by e-mail (issue 37): the owner names an address and
-- a role; the invitee follows a link to set their own password. The link's
-- token is random and only its SHA-256 is kept; it works once, until it
-- expires (72 hours), and an invite is cancelled or sent again (a new
-- token, the old one dead) from the Staff page. The mail goes through the
-- outbox as a `staff_invite` job whose payload carries the token for the
-- mail itself, and loses it once the invite is used, cancelled or resent.
create table staff_invites (
    id           bigint generated always as identity primary key,
    email        text not null,
    role         text not null,
    token_sha256 bytea not null,
    invited_by   text not null,
    created_at   timestamptz not null default now(),
    sent_at      timestamptz not null default now(),
    expires_at   timestamptz not null,
    used_at      timestamptz,
    cancelled_at timestamptz,
    constraint staff_invite_email_shape check (
        email = lower(email) and length(email) between 3 and 254 and email like '_%@_%'),
    constraint staff_invite_role_known check (role in ('owner', 'box_office', 'door')),
    constraint staff_invite_token_sha256 check (length(token_sha256) = 32),
    constraint staff_invite_token_unique unique (token_sha256),
    constraint staff_invite_expires_after_sent check (expires_at > sent_at),
    constraint staff_invite_used_or_cancelled check (used_at is null or cancelled_at is null)
);

-- one open invite per address
create unique index staff_invites_one_open on staff_invites (email)
    where used_at is null and cancelled_at is null;

do $$
declare
    v_def text;
begin
    select pg_get_constraintdef(oid) into v_def
      from pg_constraint where conname = 'job_kind_known' and conrelid = 'outbox_jobs'::regclass;
    execute 'alter table outbox_jobs drop constraint job_kind_known';
    execute 'alter table outbox_jobs add constraint job_kind_known '
            || replace(v_def, 'ARRAY[', 'ARRAY[''staff_invite''::text, ');

    select pg_get_constraintdef(oid) into v_def
      from pg_constraint where conname = 'staff_action_known' and conrelid = 'staff_actions'::regclass;
    execute 'alter table staff_actions drop constraint staff_action_known';
    execute 'alter table staff_actions add constraint staff_action_known '
            || replace(v_def, 'ARRAY[', 'ARRAY[''invite_staff''::text, ''resend_invite''::text, '
                                        '''cancel_invite''::text, ''accept_invite''::text, ');
end;
$$;
