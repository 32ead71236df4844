-- What is sold becomes one room (src/catalogue/kinds/): the kinds of
-- collection are a list the code owns, as the kinds of product are since
-- 0016; a schedule makes units of any kind a schedule can make, not pickup
-- slots only; a unit knows when it ends (a slot's length, an event's
-- end), for its calendar file; and the door's word for a used code is the
-- kind's, asked in Rust, not written here.

-- Every collection kind, as `holdfast migrate` writes it from the code's
-- list (CollectionKind::ALL in src/catalogue/kinds/collections.rs). Adding
-- one needs no migration.
create table collection_kinds (
    kind text primary key
);
insert into collection_kinds (kind) values ('event'), ('schedule'), ('shelf');
alter table collections drop constraint collection_kind_known;
alter table collections add constraint collection_kind_known
    foreign key (kind) references collection_kinds (kind);

-- A schedule, of whatever kind it makes (the kind's file says how its
-- units are named). A unit may now last a day.
alter table pickup_schedules rename to schedules;
alter table schedules
    add column kind text not null default 'pickup_slot' references product_kinds (kind);
alter table schedules drop constraint schedule_slot;
alter table schedules add constraint schedule_slot check (slot_minutes between 5 and 1440);

-- When a unit ends: a slot's end (its start and the schedule's slot
-- length), an event's end (copied onto its tiers, as its start is).
alter table collections add column ends_at timestamptz;
alter table collections add constraint collection_ends_after_start
    check (ends_at is null or starts_at is null or ends_at > starts_at);
alter table products add column ends_at timestamptz;
alter table products add constraint product_ends_after_start
    check (ends_at is null or starts_at is null or ends_at > starts_at);
update products p
   set ends_at = p.starts_at + make_interval(mins => s.slot_minutes)
  from schedules s
 where s.collection = p.collection and p.kind = s.kind and p.starts_at is not null;

-- hf_redeem answers 'redeemed' and the product kind whose words the door
-- says ("admitted", "collected"), instead of those words.
drop function hf_redeem(text, text, text, uuid);
create function hf_redeem(p_code text, p_by text, p_place text, p_attempt uuid default null)
returns table (outcome text, kind text, product_kind text, order_id uuid, customer_name text,
               what text, redeemed_at timestamptz, redeemed_by text, place text)
language plpgsql as $$
declare
    v_order uuid;
    v_kind text;
    v_product_kind text;
    v_state text;
    v_name text;
    v_refunded boolean;
    v_what text;
    r redemptions;
begin
    if p_by is null or length(p_by) not between 1 and 254 then
        perform hf_bad_input('who redeems must be named (1 to 254 characters)');
    end if;
    if p_place is null or length(p_place) > 100 then
        perform hf_bad_input('the place is at most 100 characters');
    end if;
    if p_code is null or length(p_code) not between 1 and 64 then
        return query select 'not_valid', null::text, null::text, null::uuid, null::text,
                            null::text, null::timestamptz, null::text, null::text;
        return;
    end if;
    -- unlocked: which order a code belongs to never changes
    select c.order_id, 'ticket' into v_order, v_kind from order_codes c where c.code = p_code;
    if not found then
        select o.id, 'pickup' into v_order, v_kind from orders o where o.pickup_code = p_code;
        -- shared by two orders (drawn before codes were unique): not
        -- something a door can decide
        if (select count(*) from orders o where o.pickup_code = p_code) > 1 then
            return query select 'not_valid', null::text, null::text, null::uuid, null::text,
                                'a pickup code two orders share: look the order up'::text,
                                null::timestamptz, null::text, null::text;
            return;
        end if;
    end if;
    if v_order is null then
        return query select 'not_valid', null::text, null::text, null::uuid, null::text,
                            null::text, null::timestamptz, null::text, null::text;
        return;
    end if;
    -- lock: the order, shared
    select o.state, o.customer_name into v_state, v_name from orders o where o.id = v_order for share;
    if v_kind = 'ticket' then
        select c.refunded_at is not null, p.name, p.kind into v_refunded, v_what, v_product_kind
          from order_codes c join products p on p.id = c.product_id where c.code = p_code;
    else
        select coalesce(bool_and(l.refunded_qty = l.qty), true),
               string_agg(l.name || ' × ' || (l.qty - l.refunded_qty), ', ' order by l.name)
                 filter (where l.refunded_qty < l.qty),
               min(p.kind)
          into v_refunded, v_what, v_product_kind
          from order_lines l join products p on p.id = l.product_id
          join product_kinds k on k.kind = p.kind
         where l.order_id = v_order and k.code = 'pickup';
    end if;
    select * into r from redemptions x where x.code = p_code;
    -- this very scan, run again after its commit's answer was lost: it
    -- redeemed, and says so again
    if found and p_attempt is not null and r.attempt = p_attempt then
        return query select 'redeemed', v_kind, v_product_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place;
        return;
    end if;
    if found then
        return query select 'already_used', v_kind, v_product_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place;
        return;
    end if;
    if v_refunded or v_state in ('refund_pending', 'refunded') then
        return query select 'refunded', v_kind, v_product_kind, v_order, v_name, v_what,
                            null::timestamptz, null::text, null::text;
        return;
    end if;
    if v_state <> 'paid' then
        return query select 'not_valid', v_kind, v_product_kind, v_order, v_name, v_what,
                            null::timestamptz, null::text, null::text;
        return;
    end if;
    insert into redemptions (code, order_id, kind, redeemed_by, place, attempt)
    values (p_code, v_order, v_kind, p_by, p_place, p_attempt)
    on conflict on constraint redemptions_pkey do nothing
    returning * into r;
    if r.code is not null then
        return query select 'redeemed', v_kind, v_product_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place;
        return;
    end if;
    -- another door won the same moment
    select * into r from redemptions x where x.code = p_code;
    return query select 'already_used', v_kind, v_product_kind, v_order, v_name, v_what,
                        r.redeemed_at, r.redeemed_by, r.place;
end;
$$;
