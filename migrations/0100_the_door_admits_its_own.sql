-- The door admits only its own (issue 33): a door checks an event, a
-- day's pickup slots or some tiers, and hf_redeem is told which products
-- those are (p_checks; null: any code, as the command line and the API
-- redeem). A code for something else is refused as 'not_this_door' with
-- what it is for (its event or schedule, when, the tier); box office and
-- owners may admit it anyway (p_override), and the redemption says so. An
-- order that is not paid answers 'not_paid' (it was 'not_valid'), with what
-- it is for.

alter table redemptions add column overridden boolean not null default false;

drop function hf_redeem(text, text, text, uuid);
create function hf_redeem(p_code text, p_by text, p_place text, p_attempt uuid default null,
                          p_checks text[] default null, p_override boolean default false)
returns table (outcome text, kind text, product_kind text, order_id uuid, customer_name text,
               what text, redeemed_at timestamptz, redeemed_by text, place text,
               for_title text, for_tier text, for_starts timestamptz, overridden boolean)
language plpgsql as $$
declare
    v_order uuid;
    v_kind text;
    v_product_kind text;
    v_state text;
    v_name text;
    v_refunded boolean;
    v_what text;
    v_here boolean;
    v_title text;
    v_tier text;
    v_starts timestamptz;
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
                            null::text, null::timestamptz, null::text, null::text,
                            null::text, null::text, null::timestamptz, false;
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
                                null::timestamptz, null::text, null::text,
                                null::text, null::text, null::timestamptz, false;
            return;
        end if;
    end if;
    if v_order is null then
        return query select 'not_valid', null::text, null::text, null::uuid, null::text,
                            null::text, null::timestamptz, null::text, null::text,
                            null::text, null::text, null::timestamptz, false;
        return;
    end if;
    -- lock: the order, shared
    select o.state, o.customer_name into v_state, v_name from orders o where o.id = v_order for share;
    if v_kind = 'ticket' then
        select c.refunded_at is not null, p.name, p.kind,
               p_checks is null or p.id = any (p_checks),
               co.title, p.name, coalesce(p.starts_at, co.starts_at)
          into v_refunded, v_what, v_product_kind, v_here, v_title, v_tier, v_starts
          from order_codes c join products p on p.id = c.product_id
          join collections co on co.id = p.collection
         where c.code = p_code;
    else
        select coalesce(bool_and(l.refunded_qty = l.qty), true),
               string_agg(l.name || ' × ' || (l.qty - l.refunded_qty), ', ' order by l.name)
                 filter (where l.refunded_qty < l.qty),
               min(p.kind),
               p_checks is null or coalesce(bool_or(p.id = any (p_checks)), false),
               min(co.title), min(p.name), min(p.starts_at)
          into v_refunded, v_what, v_product_kind, v_here, v_title, v_tier, v_starts
          from order_lines l join products p on p.id = l.product_id
          join product_kinds k on k.kind = p.kind
          join collections co on co.id = p.collection
         where l.order_id = v_order and k.code = 'pickup';
    end if;
    select * into r from redemptions x where x.code = p_code;
    -- this very scan, run again after its commit's answer was lost: it
    -- redeemed, and says so again
    if found and p_attempt is not null and r.attempt = p_attempt then
        return query select 'redeemed', v_kind, v_product_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place,
                            v_title, v_tier, v_starts, r.overridden;
        return;
    end if;
    if v_refunded or v_state in ('refund_pending', 'refunded') then
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
    -- another event's, another day's: not this door's, unless someone
    -- who may says so
    if not v_here and not coalesce(p_override, false) then
        return query select 'not_this_door', v_kind, v_product_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place,
                            v_title, v_tier, v_starts, false;
        return;
    end if;
    if r.code is not null then
        return query select 'already_used', v_kind, v_product_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place,
                            v_title, v_tier, v_starts, r.overridden;
        return;
    end if;
    insert into redemptions (code, order_id, kind, redeemed_by, place, attempt, overridden)
    values (p_code, v_order, v_kind, p_by, p_place, p_attempt, not v_here)
    on conflict on constraint redemptions_pkey do nothing
    returning * into r;
    if r.code is not null then
        return query select 'redeemed', v_kind, v_product_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place,
                            v_title, v_tier, v_starts, r.overridden;
        return;
    end if;
    -- another door won the same moment
    select * into r from redemptions x where x.code = p_code;
    return query select 'already_used', v_kind, v_product_kind, v_order, v_name, v_what,
                        r.redeemed_at, r.redeemed_by, r.place,
                        v_title, v_tier, v_starts, r.overridden;
end;
$$;
