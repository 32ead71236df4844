-- A short order number a person can read out (issue 33): twelve hex
-- digits in three groups, "7F3A-91C2-E4B0", drawn from the database's
-- strong random source (gen_random_uuid), so one order's number says
-- nothing of another's; unique, drawn again on the rare clash. Hex has no
-- O, I or L to mistake for 0 or 1.
create function hf_order_number() returns text
language plpgsql volatile as $$
declare
    v_hex text;
    v_number text;
begin
    loop
        v_hex := upper(substr(replace(gen_random_uuid()::text, '-', ''), 1, 12));
        v_number := substr(v_hex, 1, 4) || '-' || substr(v_hex, 5, 4) || '-' || substr(v_hex, 9, 4);
        exit when not exists (select 1 from orders o where o.number = v_number);
    end loop;
    return v_number;
end;
$$;

alter table orders add column number text;
update orders set number = hf_order_number() where number is null;
alter table orders alter column number set default hf_order_number();
alter table orders alter column number set not null;
alter table orders add constraint orders_number_key unique (number);
alter table orders add constraint order_number_shape
    check (number ~ '^[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}$');
