-- The crowd from memory (issue 45): every answer the shop's memory can
-- give is given without a database round trip, so memory keeps the
-- shop's settings those answers need (src/live/settings.rs): the shop's
-- name and looks, the currency, the ways to pay, the API keys, the
-- Idempotency-Keys claimed lately. A change to a setting tells memory to
-- read everything again at once, as a change to a product already does:
-- a key revoked stops signing within the notification's milliseconds,
-- not at the next full read.

-- (not a key's last use, marked once a minute: it would have every
-- process read everything again for nothing)
create trigger api_keys_notify_catalogue
    after insert or delete or update of name, scopes, secret_hash, revoked_at on api_keys
    for each statement execute function hf_notify_catalogue();

create trigger pay_methods_notify_catalogue
    after insert or update or delete on pay_methods
    for each statement execute function hf_notify_catalogue();

-- every page shows the shop's name and looks from memory
create trigger storefront_notify_catalogue
    after insert or update or delete on storefront
    for each statement execute function hf_notify_catalogue();

-- the shop's currency counts its schedules' too
create trigger schedules_notify_catalogue
    after insert or update or delete on schedules
    for each statement execute function hf_notify_catalogue();

-- memory reads the keys claimed since its last read, not the table
create index api_idempotency_created on api_idempotency (created_at);
