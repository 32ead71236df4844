-- Known outcomes: a write run again after its commit's answer was lost
-- (the primary died as it committed) says what the first run did rather
-- than doing it twice. Each carries an id its retries share, made once per
-- request (src/retry.rs).

-- A basket add: the add that last changed a line. The same add run again
-- finds itself there and adds nothing more.
alter table basket_lines add column last_add uuid;

-- A redemption: the scan that made it. The same scan run again is told
-- "admitted" again, not "already used" by itself.
alter table redemptions add column attempt uuid;

drop function hf_redeem(text, text, text);
create or replace function hf_redeem(p_code text, p_by text, p_place text, p_attempt uuid default null)
 RETURNS TABLE(outcome text, kind text, order_id uuid, customer_name text, what text, redeemed_at timestamp with time zone, redeemed_by text, place text)
 LANGUAGE plpgsql
AS $function$
declare
    v_order uuid;
    v_kind text;
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
        return query select 'not_valid', null::text, null::uuid, null::text, null::text,
                            null::timestamptz, null::text, null::text;
        return;
    end if;
    -- unlocked: which order a code belongs to never changes
    select c.order_id, 'ticket' into v_order, v_kind from order_codes c where c.code = p_code;
    if not found then
        select o.id, 'pickup' into v_order, v_kind from orders o where o.pickup_code = p_code;
        -- shared by two orders (drawn before codes were unique): not
        -- something a door can decide
        if (select count(*) from orders o where o.pickup_code = p_code) > 1 then
            return query select 'not_valid', null::text, null::uuid, null::text,
                                'a pickup code two orders share: look the order up'::text,
                                null::timestamptz, null::text, null::text;
            return;
        end if;
    end if;
    if v_order is null then
        return query select 'not_valid', null::text, null::uuid, null::text, null::text,
                            null::timestamptz, null::text, null::text;
        return;
    end if;
    -- lock: the order, shared
    select o.state, o.customer_name into v_state, v_name from orders o where o.id = v_order for share;
    if v_kind = 'ticket' then
        select c.refunded_at is not null, p.name into v_refunded, v_what
          from order_codes c join products p on p.id = c.product_id where c.code = p_code;
    else
        select coalesce(bool_and(l.refunded_qty = l.qty), true),
               string_agg(l.name || ' × ' || (l.qty - l.refunded_qty), ', ' order by l.name)
                 filter (where l.refunded_qty < l.qty)
          into v_refunded, v_what
          from order_lines l join products p on p.id = l.product_id
          join product_kinds k on k.kind = p.kind
         where l.order_id = v_order and k.code = 'pickup';
    end if;
    select * into r from redemptions x where x.code = p_code;
    -- this very scan, run again after its commit's answer was lost: it
    -- admitted, and says so again
    if found and p_attempt is not null and r.attempt = p_attempt then
        return query select case v_kind when 'ticket' then 'admitted' else 'collected' end,
                            v_kind, v_order, v_name, v_what, r.redeemed_at, r.redeemed_by, r.place;
        return;
    end if;
    if found then
        return query select 'already_used', v_kind, v_order, v_name, v_what,
                            r.redeemed_at, r.redeemed_by, r.place;
        return;
    end if;
    if v_refunded or v_state in ('refund_pending', 'refunded') then
        return query select 'refunded', v_kind, v_order, v_name, v_what,
                            null::timestamptz, null::text, null::text;
        return;
    end if;
    if v_state <> 'paid' then
        return query select 'not_valid', v_kind, v_order, v_name, v_what,
                            null::timestamptz, null::text, null::text;
        return;
    end if;
    insert into redemptions (code, order_id, kind, redeemed_by, place, attempt)
    values (p_code, v_order, v_kind, p_by, p_place, p_attempt)
    on conflict on constraint redemptions_pkey do nothing
    returning * into r;
    if r.code is not null then
        return query select case v_kind when 'ticket' then 'admitted' else 'collected' end,
                            v_kind, v_order, v_name, v_what, r.redeemed_at, r.redeemed_by, r.place;
        return;
    end if;
    -- another door won the same moment
    select * into r from redemptions x where x.code = p_code;
    return query select 'already_used', v_kind, v_order, v_name, v_what,
                        r.redeemed_at, r.redeemed_by, r.place;
end;
$function$;
