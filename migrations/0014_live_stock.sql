-- Holdfast: every web process keeps the catalogue and each resource's stock
-- in memory (src/live.rs) and PostgreSQL tells it what changed.
--
-- A change to a resource's counters notifies channel hf_stock with the
-- resource's id. PostgreSQL delivers a transaction's notifications at its
-- commit, and folds identical ones sent in one transaction into one, so a
-- combined batch of holds, checkouts or expiries is one notification per
-- resource, however many shoppers it served, and a rolled-back change is
-- none. A change to the catalogue notifies hf_catalogue. A notification
-- only says "read this again": the process reads the counters itself, so
-- nothing it shows ever comes from the payload.

create function hf_notify_stock() returns trigger
language plpgsql as $$
begin
    perform pg_notify('hf_stock', new.id);
    return null;
end;
$$;

create trigger resources_notify_stock
    after insert or update of total, held, sold on resources
    for each row execute function hf_notify_stock();

create function hf_notify_catalogue() returns trigger
language plpgsql as $$
begin
    perform pg_notify('hf_catalogue', '');
    return null;
end;
$$;

create trigger products_notify_catalogue
    after insert or update or delete on products
    for each statement execute function hf_notify_catalogue();
