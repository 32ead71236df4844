-- Every item an order gives a person has its own code and its own life
-- (issue 44; docs/contract.md §15). A ticket, a seat, a pickup, a table
-- booking, a jar to collect: each is a row of order_items with its code,
-- its state (valid, used, refunded, cancelled, and when it became so) and,
-- for a seat or a booking, which one. Items share a code only where their
-- kind says items of one time and place may (a pickup's lines at one
-- slot, an order's jars); a code never belongs to two orders.
--
-- Until now a pickup code lived on the order (orders.pickup_code) and
-- covered every line whose kind had a per-order code, so one order with a
-- bakery pickup on Monday and a table on Tuesday had one code: collecting
-- the bread marked the table's guest "already used". Those codes move to
-- items here: every line they covered gets an item with the same code, so
-- no shopper loses a code they hold, and each item is redeemed on its own.
--
-- The kinds' answers the database asks (which products carry codes, which
-- door checks them) are written here, as rows of product_kinds, no longer
-- by `holdfast migrate` from the code: the schema belongs to migrations,
-- and tests/api/kinds_in_the_database.rs holds the rows equal to the
-- kinds' sheets (src/catalogue/kinds/).

-- product_kinds: the code's noun (what the API and the webhooks call it)
-- and what checks it: a door by event, a door by day, the host stand, or
-- any counter; both null for a kind without a code
alter table product_kinds drop constraint product_kind_code_known;
alter table product_kinds add column checked_by text;

-- the old per-order codes become items before the kinds' nouns change
-- (their lines are those whose kind's code was 'pickup'): a line of a
-- booking cancelled by its guest is cancelled, a line refunded whole is
-- refunded
alter table order_codes rename to order_items;
alter table order_items rename constraint order_codes_order_id_fkey to order_items_order_id_fkey;
alter table order_items rename constraint order_codes_product_id_fkey to order_items_product_id_fkey;
alter table order_items rename constraint order_codes_seat_id_fkey to order_items_seat_id_fkey;
alter index order_codes_by_order rename to order_items_by_order;
alter trigger order_codes_seats on order_items rename to order_items_seats;
alter table order_items drop constraint order_codes_pkey;
alter table order_items add column id bigint generated always as identity;
alter table order_items add constraint order_items_pkey primary key (id);
alter table order_items add column booking uuid references bookings (hold_id);
alter table order_items add column state text not null default 'valid';
alter table order_items add column state_at timestamptz;
comment on table order_items is
    'What an order gives a person, each with its code and state; items share a code only where their kind says one time and place may';

update order_items set state = 'refunded', state_at = refunded_at where refunded_at is not null;
alter table order_items drop column refunded_at;

insert into order_items (code, order_id, product_id, created_at, booking, state, state_at)
select o.pickup_code, o.id, l.product_id, coalesce(o.paid_at, o.created_at), b.hold_id,
       case when l.refunded_qty < l.qty then 'valid'
            when b.hold_id is not null
                 and exists (select 1 from order_refunds f
                              where f.order_id = o.id
                                and f.request_key = 'guest-cancel-' || replace(o.id::text, '-', ''))
              then 'cancelled'
            else 'refunded' end,
       case when l.refunded_qty < l.qty then null
            else coalesce((select max(f.created_at) from order_refunds f where f.order_id = o.id),
                          o.updated_at) end
  from orders o
  join order_lines l on l.order_id = o.id
  join products p on p.id = l.product_id
  join product_kinds k on k.kind = p.kind
  left join bookings b on b.order_id = o.id and b.product_id = l.product_id
 where o.pickup_code is not null and k.code = 'pickup';

update product_kinds k
   set code = x.code, checked_by = x.checked_by
  from (values ('pickup_slot', 'pickup', 'day'),
               ('ticket', 'ticket', 'event'),
               ('stock', 'collection', 'counter'),
               ('table', 'booking', 'host_stand'),
               ('seat', 'ticket', 'event')) as x(kind, code, checked_by)
 where k.kind = x.kind;
insert into product_kinds (kind, code, checked_by)
values ('pickup_slot', 'pickup', 'day'),
       ('ticket', 'ticket', 'event'),
       ('stock', 'collection', 'counter'),
       ('table', 'booking', 'host_stand'),
       ('seat', 'ticket', 'event')
on conflict (kind) do nothing;
insert into collection_kinds (kind)
values ('event'), ('schedule'), ('shelf'), ('dining_room')
on conflict (kind) do nothing;
alter table product_kinds
    add constraint product_kind_checked_by_known
        check (checked_by in ('event', 'day', 'host_stand', 'counter')),
    add constraint product_kind_code_checked check ((code is null) = (checked_by is null)),
    add constraint product_kind_code_noun check (code ~ '^[a-z]{1,20}$');

-- redemptions: one per item. A scan of a shared code redeems each of its
-- items the door admits; the row says which item, and its kind is the
-- item's product kind. An old redemption of a per-order code stands for
-- the items of that code whose time was within 18 hours of it (the bread
-- collected on Monday, not Tuesday's table), or for all of them when none
-- was: what the door of that day handed over.
alter table redemptions disable trigger redemptions_append_only;
alter table redemptions disable trigger redemptions_webhook;
alter table redemptions drop constraint redemptions_pkey;
alter table redemptions drop constraint redemption_kind_known;
alter table redemptions add column item_id bigint;
update redemptions r set item_id = i.id
  from order_items i
 where r.kind = 'ticket' and i.code = r.code and i.order_id = r.order_id;
create temporary table legacy_uses on commit drop as
with items as (
    select r.code, r.redeemed_at, i.id as item_id,
           abs(extract(epoch from coalesce(p.starts_at, c.starts_at) - r.redeemed_at)) < 64800
             as near
      from redemptions r
      join order_items i on i.code = r.code and i.order_id = r.order_id
      join products p on p.id = i.product_id
      join collections c on c.id = p.collection
     where r.kind = 'pickup'
)
select i.code, i.item_id,
       row_number() over (partition by i.code order by i.item_id) as n
  from items i
 where i.near or not exists (select 1 from items j where j.code = i.code and j.near);
update redemptions r set item_id = u.item_id
  from legacy_uses u
 where u.code = r.code and u.n = 1 and r.kind = 'pickup';
insert into redemptions (code, order_id, kind, redeemed_at, redeemed_by, place, attempt,
                         overridden, item_id)
select r.code, r.order_id, r.kind, r.redeemed_at, r.redeemed_by, r.place, null, r.overridden,
       u.item_id
  from legacy_uses u join redemptions r on r.code = u.code and r.kind = 'pickup'
 where u.n > 1;
-- a redemption with no item left to stand for (its lines are gone): none
-- is expected; one would stop the migration here rather than be lost
alter table redemptions alter column item_id set not null;
update redemptions r set kind = p.kind
  from order_items i join products p on p.id = i.product_id
 where i.id = r.item_id;
alter table redemptions
    add constraint redemptions_pkey primary key (item_id),
    add constraint redemptions_item_id_fkey foreign key (item_id) references order_items (id),
    add constraint redemption_kind_known foreign key (kind) references product_kinds (kind);
create index redemptions_by_code on redemptions (code);
alter table redemptions enable trigger redemptions_append_only;
alter table redemptions enable trigger redemptions_webhook;

update order_items i set state = 'used', state_at = r.redeemed_at
  from redemptions r
 where r.item_id = i.id and i.state = 'valid';

drop index orders_pickup_code;
alter table orders drop column pickup_code;

alter table order_items
    add constraint item_state_known check (state in ('valid', 'used', 'refunded', 'cancelled')),
    add constraint item_state_when check ((state = 'valid') = (state_at is null)),
    add constraint item_code_shape check (code ~ '^[A-Z0-9][A-Z0-9-]{3,63}$'),
    add constraint item_once_per_code unique (code, product_id),
    add constraint item_code_one_order exclude using gist (code with =, order_id with <>);
create index order_items_by_booking on order_items (booking) where booking is not null;

-- an item's life goes one way: valid to used, refunded or cancelled; used
-- to refunded (a refund with the override); refunded and cancelled are
-- final. Nothing revives silently.
create function hf_item_state_guard() returns trigger
language plpgsql as $$
begin
    if new.state is distinct from old.state
       and not (old.state = 'valid' or (old.state = 'used' and new.state = 'refunded')) then
        raise exception 'an item % cannot go from % to %', old.id, old.state, new.state
            using errcode = 'check_violation', constraint = 'item_state_one_way';
    end if;
    if (new.code, new.order_id, new.product_id) is distinct from
       (old.code, old.order_id, old.product_id) then
        raise exception 'an item''s code, order and product never change'
            using errcode = 'check_violation', constraint = 'item_state_one_way';
    end if;
    return new;
end;
$$;
create trigger order_items_one_way before update on order_items
    for each row execute function hf_item_state_guard();

-- A scan: the items of the code this door admits (all of them with no
-- door, as the command line and the API redeem; all of them with the
-- override), each redeemed once. Answers as before, with 'cancelled' for
-- items their guest cancelled; `what` names every item in question with
-- its units, and the first one's event or schedule, product and time say
-- what the code is for.
create or replace function hf_redeem(p_code text, p_by text, p_place text,
                                     p_attempt uuid default null, p_checks text[] default null,
                                     p_override boolean default false)
returns table (outcome text, kind text, product_kind text, order_id uuid, customer_name text,
               what text, redeemed_at timestamptz, redeemed_by text, place text,
               for_title text, for_tier text, for_starts timestamptz, overridden boolean)
language plpgsql as $$
declare
    v_order uuid;
    v_state text;
    v_name text;
    v_here boolean;
    v_items bigint[];
    v_kind text;
    v_product_kind text;
    v_what text;
    v_title text;
    v_tier text;
    v_starts timestamptz;
    v_live integer;
    v_used integer;
    v_cancelled integer;
    r redemptions;
begin
    if p_by is null or length(p_by) not between 1 and 254 then
        perform hf_bad_input('who redeems must be named (1 to 254 characters)');
    end if;
    if p_place is null or length(p_place) > 100 then
        perform hf_bad_input('the place is at most 100 characters');
    end if;
    -- unlocked: which order a code belongs to never changes
    if p_code is not null and length(p_code) between 1 and 64 then
        select i.order_id into v_order from order_items i where i.code = p_code limit 1;
    end if;
    if v_order is null then
        return query select 'not_valid', null::text, null::text, null::uuid, null::text,
                            null::text, null::timestamptz, null::text, null::text,
                            null::text, null::text, null::timestamptz, false;
        return;
    end if;
    -- lock: the order, shared (a refund or a guest's cancel holds it
    -- exclusively, so an item is never redeemed and refunded at once)
    select o.state, o.customer_name into v_state, v_name from orders o where o.id = v_order for share;
    v_here := p_checks is null
              or exists (select 1 from order_items i
                          where i.code = p_code and i.product_id = any (p_checks));
    -- the items in question: this door's, or all of the code's when none is
    select array_agg(i.id order by i.id) into v_items
      from order_items i
     where i.code = p_code and (not v_here or p_checks is null or i.product_id = any (p_checks));
    select k.code, p.kind, co.title, p.name || coalesce(', seat ' || s.label, ''),
           coalesce(p.starts_at, co.starts_at)
      into v_kind, v_product_kind, v_title, v_tier, v_starts
      from order_items i join products p on p.id = i.product_id
      join product_kinds k on k.kind = p.kind
      join collections co on co.id = p.collection
      left join seats s on s.id = i.seat_id
     where i.id = v_items[1];
    select string_agg(w.words, ', ' order by w.id) into v_what
      from (select i.id,
                   coalesce(p.name || ', seat ' || s.label, l.name, p.name)
                   || case when i.seat_id is null and l.qty - l.refunded_qty > 1
                                and not exists (select 1 from order_items j
                                                 where j.order_id = i.order_id
                                                   and j.product_id = i.product_id
                                                   and j.id <> i.id)
                           then ' × ' || (l.qty - l.refunded_qty) else '' end as words
              from order_items i join products p on p.id = i.product_id
              left join order_lines l on l.order_id = i.order_id and l.product_id = i.product_id
              left join seats s on s.id = i.seat_id
             where i.id = any (v_items)) w;
    -- this very scan, run again after its commit's answer was lost: it
    -- redeemed, and says so again
    if p_attempt is not null then
        select * into r from redemptions x
         where x.item_id = any (v_items) and x.attempt = p_attempt
         order by x.item_id limit 1;
        if found then
            return query select 'redeemed', v_kind, v_product_kind, v_order, v_name, v_what,
                                r.redeemed_at, r.redeemed_by, r.place,
                                v_title, v_tier, v_starts, r.overridden;
            return;
        end if;
    end if;
    if v_state in ('refund_pending', 'refunded') then
        return query select 'refunded', v_kind, v_product_kind, v_order, v_name, v_what,
                            null::timestamptz, null::text, null::text,
                            v_title, v_tier, v_starts, false;
        return;
    end if;
    if v_state <> 'paid' then
        return query select 'not_paid', v_kind, v_product_kind, v_order, v_name, v_what,
                            null::timestamptz, null::text, null::text,
                            v_title, v_tier, v_starts, false;
        return;
    end if;
    -- the latest use of the items in question, for the answers that name it
    select * into r from redemptions x where x.item_id = any (v_items)
     order by x.redeemed_at desc, x.item_id limit 1;
    -- another event's, another day's: not this door's, unless someone
    -- who may says so
    if not v_here and not coalesce(p_override, false) then
        return query select 'not_this_door', v_kind, v_product_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place,
                            v_title, v_tier, v_starts, false;
        return;
    end if;
    select count(*) filter (where i.state = 'valid'), count(*) filter (where i.state = 'used'),
           count(*) filter (where i.state = 'cancelled')
      into v_live, v_used, v_cancelled
      from order_items i where i.id = any (v_items);
    if v_live = 0 then
        return query select case when v_used > 0 then 'already_used'
                                 when v_cancelled > 0 then 'cancelled'
                                 else 'refunded' end,
                            v_kind, v_product_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place,
                            v_title, v_tier, v_starts, coalesce(r.overridden, false);
        return;
    end if;
    -- each valid item once: two doors at one moment meet at the primary
    -- key, in the items' order, and the later finds them used
    with fresh as (
        insert into redemptions (code, order_id, kind, redeemed_by, place, attempt, overridden,
                                 item_id)
        select p_code, v_order, p.kind, p_by, p_place, p_attempt, not v_here, i.id
          from order_items i join products p on p.id = i.product_id
         where i.id = any (v_items) and i.state = 'valid'
         order by i.id
        on conflict on constraint redemptions_pkey do nothing
        returning *
    ), marked as (
        update order_items i set state = 'used', state_at = f.redeemed_at
          from fresh f where i.id = f.item_id
        returning f.*
    )
    select m.* into r from marked m order by m.item_id limit 1;
    if r.item_id is not null then
        return query select 'redeemed', v_kind, v_product_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place,
                            v_title, v_tier, v_starts, r.overridden;
        return;
    end if;
    -- another door won the same moment
    select * into r from redemptions x where x.item_id = any (v_items)
     order by x.redeemed_at desc, x.item_id limit 1;
    return query select 'already_used', v_kind, v_product_kind, v_order, v_name, v_what,
                        r.redeemed_at, r.redeemed_by, r.place,
                        v_title, v_tier, v_starts, r.overridden;
end;
$$;

-- a seat's items carry their seats (the live pins of the order's holds,
-- in the plan's order), as its codes did
create or replace function hf_seat_codes() returns trigger
language plpgsql as $$
begin
    if not exists (select 1 from inserted i join seat_sections s on s.product_id = i.product_id) then
        return null;
    end if;
    update order_items c
       set seat_id = x.seat_id
      from (select i.id, s.seat_id
              from (select i.id, i.order_id, i.product_id,
                           row_number() over (partition by i.order_id, i.product_id
                                              order by i.code) as n
                      from inserted i
                      join seat_sections sec on sec.product_id = i.product_id
                     where i.seat_id is null) i
              join (select o.id as order_id, sec.product_id, p.seat_id,
                           row_number() over (partition by o.id, sec.product_id
                                              order by st.row_rank, st.run, st.pos) as n
                      from orders o
                      join holds h on h.purchase_id = o.hold_id
                      join seat_sections sec on sec.resource_id = h.resource_id
                      join seat_pins p on p.hold_id = h.id and p.live
                      join seats st on st.id = p.seat_id
                     where o.id in (select order_id from inserted)
                       and not exists (select 1 from order_items c2
                                        where c2.seat_id = p.seat_id and c2.order_id = o.id
                                          and c2.state in ('valid', 'used'))) s
                on s.order_id = i.order_id and s.product_id = i.product_id and s.n = i.n) x
     where c.id = x.id;
    return null;
end;
$$;

-- a refund's seats come back by item
drop function hf_seat_return(uuid, text[], boolean);
create function hf_seat_return(p_purchase uuid, p_items bigint[], p_restock boolean)
returns integer
language plpgsql as $$
declare
    v_seats bigint[];
begin
    with ended as (
        update seat_pins p
           set live = false, ended_at = clock_timestamp(), end_reason = 'returned'
          from order_items c, holds h
         where c.id = any (p_items) and c.seat_id = p.seat_id
           and p.hold_id = h.id and h.purchase_id = p_purchase and p.live
        returning p.seat_id
    )
    select array_agg(seat_id) into v_seats from ended;
    if v_seats is not null and not p_restock then
        update seats set state = 'blocked', note = 'taken off sale with a refund'
         where id = any (v_seats);
    end if;
    return coalesce(cardinality(v_seats), 0);
end;
$$;

-- code.redeemed: one event per item, saying the code's noun as before
-- ('ticket', 'pickup', now also 'booking' and 'collection') and the item
create or replace function hf_webhook_code_redeemed() returns trigger
language plpgsql as $$
begin
    perform hf_webhook_event('code.redeemed', jsonb_build_object(
        'code', new.code,
        'kind', (select k.code from product_kinds k where k.kind = new.kind),
        'order_id', new.order_id,
        'order_token', (select token from orders where id = new.order_id),
        'redeemed_at', new.redeemed_at,
        'redeemed_by', new.redeemed_by,
        'place', new.place,
        'item', (select jsonb_build_object('id', i.id, 'product_id', i.product_id,
                                           'product_kind', new.kind)
                   from order_items i where i.id = new.item_id),
        'seat', (select s.label from order_items c join seats s on s.id = c.seat_id
                  where c.id = new.item_id)));
    return null;
end;
$$;

-- an order as webhooks and the API show it: its items too, each with its
-- code, state, and its seat or booking
CREATE OR REPLACE FUNCTION public.hf_webhook_order(p_order uuid)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
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
                                     || case when sec.product_id is null then '{}'::jsonb
                                             else jsonb_build_object('seats', coalesce((
                                                 select jsonb_agg(st.label order by st.row_rank, st.run, st.pos)
                                                   from holds h
                                                   join seat_pins p on p.hold_id = h.id
                                                   join seats st on st.id = p.seat_id
                                                  where h.purchase_id = o.hold_id
                                                    and h.resource_id = sec.resource_id
                                                    and (p.live or o.state not in ('pending', 'paid', 'settling'))),
                                                 '[]'::jsonb)) end
                                     order by l.product_id), '[]'::jsonb)
                           from order_lines l
                           left join seat_sections sec on sec.product_id = l.product_id
                          where l.order_id = o.id),
               'items', (select coalesce(jsonb_agg(jsonb_build_object(
                                     'id', i.id,
                                     'code', i.code,
                                     'product_id', i.product_id,
                                     'kind', p.kind,
                                     'state', i.state,
                                     'state_at', i.state_at)
                                     || case when s.id is null then '{}'::jsonb
                                             else jsonb_build_object('seat', s.label) end
                                     || case when b.hold_id is null then '{}'::jsonb
                                             else jsonb_build_object(
                                                 'booking', jsonb_build_object(
                                                     'party', b.party,
                                                     'starts_at', b.starts_at,
                                                     'ends_at', b.ends_at)) end
                                     order by i.id), '[]'::jsonb)
                           from order_items i
                           join products p on p.id = i.product_id
                           left join seats s on s.id = i.seat_id
                           left join bookings b on b.hold_id = i.booking
                          where i.order_id = o.id))
      from orders o where o.id = p_order
$function$;

-- the seat plan, as before, reading the items for the seats codes named
CREATE OR REPLACE FUNCTION public.hf_seat_plan(p_section text, p_rows jsonb)
 RETURNS TABLE(status text, added integer, placed integer, removed integer, refused text[], total integer)
 LANGUAGE plpgsql
AS $function$
declare
    v_section seat_sections;
    v_refused text[];
    v_added integer;
    v_placed integer;
    v_removed integer;
    v_blocked integer;
    v_total integer;
begin
    select * into v_section from seat_sections where product_id = p_section;
    if not found then
        perform hf_bad_input(format('%s is not a seated section', p_section));
    end if;
    if p_rows is null or jsonb_typeof(p_rows) <> 'array' or jsonb_array_length(p_rows) not between 1 and 999 then
        perform hf_bad_input('a plan is 1 to 999 rows');
    end if;
    -- each row's shape, read as JSON before anything is cast
    if exists (
        select 1 from jsonb_array_elements(p_rows) e
         where jsonb_typeof(e) <> 'object'
            or jsonb_typeof(e -> 'row') is distinct from 'string'
            or (e ->> 'row') !~ '^[A-Za-z0-9][A-Za-z0-9 ._-]{0,11}$'
            or jsonb_typeof(e -> 'rank') is distinct from 'number'
            or (e ->> 'rank') !~ '^0*[1-9][0-9]{0,2}$'
            or jsonb_typeof(e -> 'seats') is distinct from 'array'
            or jsonb_array_length(e -> 'seats') <> 2
            or exists (select 1 from jsonb_array_elements(e -> 'seats') n
                        where (n #>> '{}') !~ '^[0-9]{1,4}$')
            or exists (select 1 from jsonb_array_elements(coalesce(e -> 'aisles_after', '[]')
                                                          || coalesce(e -> 'wheelchair', '[]')
                                                          || coalesce(e -> 'companion', '[]')) n
                        where (n #>> '{}') !~ '^[0-9]{1,4}$')
            or case when (e #>> '{seats,0}') ~ '^[0-9]{1,4}$' and (e #>> '{seats,1}') ~ '^[0-9]{1,4}$'
                    then (e #>> '{seats,0}')::int > (e #>> '{seats,1}')::int
                         or (e #>> '{seats,1}')::int - (e #>> '{seats,0}')::int >= 1000
                    else true end)
       or (select count(distinct e ->> 'row') from jsonb_array_elements(p_rows) e) <> jsonb_array_length(p_rows)
       or (select count(distinct e ->> 'rank') from jsonb_array_elements(p_rows) e) <> jsonb_array_length(p_rows) then
        perform hf_bad_input('each row has a label (a letter or digit first, at most 12), a rank 1 to 999 '
                             'and its first and last seat numbers (at most 1,000 seats), each label and '
                             'rank once; aisles and accessible places are seat numbers');
    end if;
    if to_regclass('pg_temp.plan_seats') is not null then
        drop table pg_temp.plan_seats;
    end if;
    create temporary table plan_seats (
        label text primary key, row_label text, number integer, row_rank integer, run integer,
        pos integer, x integer, y integer, access text
    ) on commit drop;
    insert into plan_seats
    select r.row_label || '-' || n, r.row_label, n, r.row_rank,
           r.row_rank * 1000 + (select count(*) from unnest(r.aisles) a where a < n)::int,
           n,
           n * 10 + 20 * (select count(*) from unnest(r.aisles) a where a < n)::int
               - (10 * (r.first + r.last) + 20 * cardinality(r.aisles)) / 2,
           r.row_rank * 12,
           case when n = any (r.wheelchair) then 'wheelchair'
                when n = any (r.companion) then 'companion' else 'none' end
      from (select e ->> 'row' as row_label, (e ->> 'rank')::int as row_rank,
                   (e #>> '{seats,0}')::int as first, (e #>> '{seats,1}')::int as last,
                   array(select x::int from jsonb_array_elements_text(coalesce(e -> 'aisles_after', '[]')) x
                          where x::int >= (e #>> '{seats,0}')::int
                            and x::int < (e #>> '{seats,1}')::int) as aisles,
                   array(select jsonb_array_elements_text(coalesce(e -> 'wheelchair', '[]'))::int) as wheelchair,
                   array(select jsonb_array_elements_text(coalesce(e -> 'companion', '[]'))::int) as companion
              from jsonb_array_elements(p_rows) e) r,
           generate_series(r.first, r.last) n;

    -- lock: the section
    perform 1 from resources where id = v_section.resource_id for no key update;
    perform hf_release_aside(v_section.resource_id, clock_timestamp());
    perform hf_seat_expire_due(v_section.resource_id);
    select array_agg(s.label order by s.row_rank, s.run, s.pos) into v_refused
      from seats s
     where s.section = p_section and not exists (select 1 from plan_seats p where p.label = s.label)
       and exists (select 1 from seat_pins p where p.seat_id = s.id and p.live);
    if v_refused is not null then
        perform hf_hand_over(v_section.resource_id, clock_timestamp());
        return query select 'refused', 0, 0, 0, v_refused, null::integer;
        return;
    end if;

    -- gone from the plan: removed, or blocked when a pin or a code ever named it
    with gone as (
        select s.id from seats s
         where s.section = p_section and not exists (select 1 from plan_seats p where p.label = s.label)
    ), named as (
        select g.id from gone g
         where exists (select 1 from seat_pins p where p.seat_id = g.id)
            or exists (select 1 from order_items c where c.seat_id = g.id)
    ), blocked as (
        update seats s set state = 'blocked', note = 'off the plan', run = -s.id, pos = 0
          from named n where s.id = n.id and (s.state <> 'blocked' or s.note <> 'off the plan')
        returning 1
    )
    select count(*)::int into v_blocked from blocked;
    delete from seats s
     where s.section = p_section and not exists (select 1 from plan_seats p where p.label = s.label)
       and not exists (select 1 from seat_pins p where p.seat_id = s.id)
       and not exists (select 1 from order_items c where c.seat_id = s.id);
    get diagnostics v_removed = row_count;
    -- still in it: its new place (moved aside first, so no two share a
    -- place on the way)
    update seats s set run = -1000000 - s.id
      from plan_seats p
     where s.section = p_section and s.label = p.label
       and (s.run, s.pos) is distinct from (p.run, p.pos);
    update seats s
       set row_label = p.row_label, number = p.number, row_rank = p.row_rank, run = p.run,
           pos = p.pos, x = p.x, y = p.y, access = p.access,
           -- back in the plan: on sale again
           state = case when s.note = 'off the plan' then 'open' else s.state end,
           note = case when s.note = 'off the plan' then '' else s.note end
      from plan_seats p
     where s.section = p_section and s.label = p.label
       and ((s.row_label, s.number, s.row_rank, s.run, s.pos, s.x, s.y, s.access)
            is distinct from (p.row_label, p.number, p.row_rank, p.run, p.pos, p.x, p.y, p.access)
            or s.note = 'off the plan');
    get diagnostics v_placed = row_count;
    insert into seats (section, label, row_label, number, row_rank, run, pos, x, y, access)
    select p_section, p.label, p.row_label, p.number, p.row_rank, p.run, p.pos, p.x, p.y, p.access
      from plan_seats p
     where not exists (select 1 from seats s where s.section = p_section and s.label = p.label);
    get diagnostics v_added = row_count;

    select count(*)::int into v_total from seats s where s.section = p_section and s.state = 'open';
    perform 1 from hf_upsert_resource(v_section.resource_id, v_total);
    perform hf_hand_over(v_section.resource_id, clock_timestamp());
    return query select 'changed', v_added, v_placed, v_removed + v_blocked, null::text[], v_total;
end;
$function$;
