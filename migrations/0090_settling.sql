-- Money that takes days (docs/design.md, "Money that takes days").
--
-- A payment the provider says is committed but not yet money (a bank
-- debit settling, a bank that has not answered) moves its purchase into a
-- settling phase of `awaiting_payment`: the hold keeps its units until the
-- method's deadline plus a grace delay, and counts as held everywhere a
-- paying hold does. Money that comes after a purchase ended meets one rule,
-- `hf_claim_again`: claimed again at once if the same units are free and
-- nobody in line has a better right to them, else refunded.

-- How long after a method's deadline money on its way still counts as in
-- time (bank holidays, a webhook retried for a while).
alter table inventory_settings
    add column settle_grace interval not null default interval '1 day',
    add constraint settle_grace_non_negative check (settle_grace >= interval '0');

-- How long each provider's delayed methods may take to say yes or no, from
-- the providers' documentation (the source column names it). `method =
-- '*'`: any method of that provider not listed.
create table settle_windows (
    provider       text not null,
    method         text not null,
    days           integer not null,
    -- Monday to Friday (in UTC) only, or every day
    business_days  boolean not null,
    source         text not null,
    updated_at     timestamptz not null default now(),
    primary key (provider, method),
    -- `holdfast migrate` rewrites this list from the providers Holdfast has
    constraint settle_window_provider_known check (provider in ('razorpay', 'stripe')),
    constraint settle_window_method_shape check (method = '*' or method ~ '^[a-z][a-z0-9_]{0,63}$'),
    constraint settle_window_days check (days between 1 and 90),
    constraint settle_window_source_shape check (length(source) between 1 and 500)
);

insert into settle_windows (provider, method, days, business_days, source) values
    ('stripe', 'sepa_debit', 14, true,
     'docs.stripe.com/payments/sepa-debit: "it can take up to 14 business days to receive notification on the success or failure of a payment … the average is 7 to 8 business days"'),
    ('stripe', 'us_bank_account', 4, true,
     'docs.stripe.com/payments/ach-direct-debit: "It can take up to 4 business days to receive acknowledgement of success or failure"'),
    ('stripe', 'bacs_debit', 7, true,
     'docs.stripe.com/payments/payment-methods/bacs-debit: 4 business days with a mandate in place, "when you must collect a new mandate, it can take 7 business days"'),
    ('stripe', 'au_becs_debit', 3, true,
     'docs.stripe.com/payments/au-becs-debit: "it can take up to three business days to receive notification on the success or failure of a payment"'),
    ('stripe', '*', 14, true,
     'any other delayed notification method (docs.stripe.com/payments/payment-methods#payment-notification): the longest Stripe names, SEPA Direct Debit''s'),
    ('razorpay', '*', 5, false,
     'razorpay.com/docs/payments/payments/capture-settings/api: "Razorpay polls the APIs intermittently for 5 days" for a late authorisation (3 days on razorpay.com/docs/payments/payments/late-authorisation: the longer is taken)');

-- A settling window is never shorter than the payment phase it replaces:
-- checked whenever a window or the payment window changes, as a CHECK
-- across the two tables would.
create function hf_settle_windows_exceed_payment_window() returns trigger
language plpgsql as $$
declare
    v_window interval;
    v_short settle_windows;
begin
    select payment_window into v_window from inventory_settings;
    select * into v_short from settle_windows w
     where make_interval(days => w.days) <= v_window
     order by w.days, w.provider, w.method
     limit 1;
    if found then
        raise exception 'a settling window (% %: % days) must be longer than the payment window (%)',
                        v_short.provider, v_short.method, v_short.days, v_window
            using errcode = 'check_violation', constraint = 'settle_window_exceeds_payment_window';
    end if;
    return null;
end;
$$;
create constraint trigger settle_window_exceeds_payment_window
    after insert or update on settle_windows
    for each row execute function hf_settle_windows_exceed_payment_window();
create constraint trigger settle_window_exceeds_payment_window
    after update of payment_window on inventory_settings
    for each row execute function hf_settle_windows_exceed_payment_window();

-- The settling phase of a paying hold. Set together, never unset.
alter table holds
    -- the provider and its method (`stripe:sepa_debit`, `razorpay:upi`)
    add column settle_method text,
    -- when the provider said the shopper committed
    add column settling_at timestamptz,
    -- when the method's money is due: the units are the shopper's until then
    add column settle_deadline timestamptz,
    -- how long after the deadline money is still taken as in time
    add column settle_grace interval,
    -- for a hold made by the late-money rule: the ended hold it claimed again
    add column reclaims uuid references holds (id),
    add constraint settling_shape check (
        (settle_method is null) = (settling_at is null)
        and (settling_at is null) = (settle_deadline is null)
        and (settle_deadline is null) = (settle_grace is null)),
    add constraint settling_was_paying check (
        settle_deadline is null or (state <> 'held' and payment_started_at is not null)),
    add constraint settling_after_start check (settle_deadline is null or settle_deadline > settling_at),
    -- the sweeper expires a paying hold at its payment deadline: for a
    -- settling hold, never before the deadline plus grace
    add constraint settling_covers_grace check (
        settle_deadline is null
        or (settle_grace >= interval '0' and payment_deadline >= settle_deadline + settle_grace)),
    add constraint reclaim_is_a_sale check (reclaims is null or state = 'confirmed');
create index holds_settling on holds (resource_id, settle_deadline)
    where state = 'awaiting_payment' and settle_deadline is not null;

-- Orders: `settling` between `pending` and the end, with what the pages
-- show (the engine's holds are the truth), and what the late-money rule
-- decided for money that came after the holds ended.
alter table orders
    add column settle_method text,
    add column settling_until timestamptz,
    add column late_money text,
    add column late_money_at timestamptz,
    add constraint order_settling_shape check (
        state <> 'settling' or (settle_method is not null and settling_until is not null)),
    add constraint order_late_money_known check (late_money in ('claimed_again', 'refunded')),
    add constraint order_late_money_when check ((late_money is null) = (late_money_at is null));
create index orders_settling on orders (settling_until) where state = 'settling';

-- Other migrations of this release widen the same lists; add to the list
-- as it is now rather than restate it.
do $$
declare
    v_def text;
begin
    select pg_get_constraintdef(oid) into v_def
      from pg_constraint where conname = 'order_state_known' and conrelid = 'orders'::regclass;
    execute 'alter table orders drop constraint order_state_known';
    execute 'alter table orders add constraint order_state_known '
            || replace(v_def, 'ARRAY[', 'ARRAY[''settling''::text, ');

    select pg_get_constraintdef(oid) into v_def
      from pg_constraint where conname = 'event_kind_known' and conrelid = 'hold_events'::regclass;
    execute 'alter table hold_events drop constraint event_kind_known';
    execute 'alter table hold_events add constraint event_kind_known '
            || replace(v_def, 'ARRAY[', 'ARRAY[''settling''::text, ''reclaimed''::text, ');

    select pg_get_constraintdef(oid) into v_def
      from pg_constraint where conname = 'job_kind_known' and conrelid = 'outbox_jobs'::regclass;
    execute 'alter table outbox_jobs drop constraint job_kind_known';
    execute 'alter table outbox_jobs add constraint job_kind_known '
            || replace(v_def, 'ARRAY[', 'ARRAY[''order_settling''::text, ');
end;
$$;

-- When `p_days` (business days: Monday to Friday, counted in UTC) have
-- passed since `p_from`. Bank holidays are not known here: the grace
-- delay covers them.
create function hf_settle_deadline(p_from timestamptz, p_days integer, p_business boolean)
returns timestamptz
language plpgsql immutable as $$
declare
    v_at timestamptz := p_from;
    v_left integer := p_days;
begin
    if not p_business then
        return p_from + p_days * interval '24 hours';
    end if;
    while v_left > 0 loop
        v_at := v_at + interval '24 hours';
        if extract(isodow from v_at at time zone 'UTC') < 6 then
            v_left := v_left - 1;
        end if;
    end loop;
    return v_at;
end;
$$;

-- The window of a provider's method: its own row, else the provider's `*`.
create function hf_settle_window(p_provider text, p_method text) returns settle_windows
language sql stable as $$
    select * from settle_windows
     where provider = p_provider and method in (coalesce(p_method, '*'), '*')
     order by (method = '*')
     limit 1;
$$;

-- Move a purchase into the settling phase: the provider said its shopper
-- committed to a method that settles later. Every live line becomes (or
-- stays) a paying hold whose payment deadline is the method's deadline
-- plus the grace delay, never earlier than it was. A purchase that ended
-- is not revived here: its money, if it comes, meets hf_claim_again.
create function hf_begin_settling(p_id uuid, p_provider text, p_method text, p_actor text default 'payment')
returns table (status text, purchase_id uuid, settle_method text, settle_deadline timestamptz,
               payment_deadline timestamptz)
language plpgsql as $$
declare
    s inventory_settings;
    w settle_windows;
    v_purchase uuid;
    v_now timestamptz;
    v_shape purchase_shape;
    v_ended text;
    v_method text;
    v_deadline timestamptz;
begin
    if p_provider is null or length(p_provider) not between 1 and 40 then
        perform hf_bad_input('a settling payment names its provider');
    end if;
    if p_method is not null and p_method !~ '^[a-z][a-z0-9_]{0,63}$' then
        perform hf_bad_input(format('not a payment method: %s', left(p_method, 70)));
    end if;
    if p_actor is null or length(p_actor) not between 1 and 200 then
        perform hf_bad_input('actor must be 1 to 200 characters');
    end if;
    select * into w from hf_settle_window(p_provider, p_method);
    if w.provider is null then
        perform hf_bad_input(format('no settling window for %s (settle_windows)', p_provider));
    end if;

    v_purchase := hf_lock_purchase(p_id);
    if v_purchase is null then
        return query select 'not_found', p_id, null::text, null::timestamptz, null::timestamptz;
        return;
    end if;
    v_now := clock_timestamp();
    v_shape := hf_purchase_shape(v_purchase, v_now);
    if v_shape.confirmed > 0 then
        return query select 'confirmed', v_purchase, null::text, null::timestamptz, null::timestamptz;
        return;
    end if;
    v_ended := hf_settle_ended(v_purchase, v_shape, v_now);
    if v_ended is not null then
        return query select v_ended, v_purchase, null::text, null::timestamptz, null::timestamptz;
        return;
    end if;
    -- the same debit reported again (the webhook, the return, reconciliation)
    if exists (select 1 from holds h where h.purchase_id = v_purchase and h.settle_deadline is not null) then
        return query
            select 'replayed', v_purchase, min(h.settle_method), min(h.settle_deadline), min(h.payment_deadline)
              from holds h where h.purchase_id = v_purchase;
        return;
    end if;

    select * into s from inventory_settings;
    v_method := p_provider || ':' || coalesce(p_method, '*');
    v_deadline := hf_settle_deadline(v_now, w.days, w.business_days);
    with live as (
        select h.id, h.state as old_state from holds h
         where h.purchase_id = v_purchase and h.state in ('held', 'awaiting_payment')
    ), moved as (
        update holds h
           set state = 'awaiting_payment',
               payment_started_at = coalesce(h.payment_started_at, v_now),
               settle_method = v_method,
               settling_at = v_now,
               settle_deadline = greatest(v_deadline, coalesce(h.payment_deadline, v_now)),
               settle_grace = s.settle_grace,
               payment_deadline = greatest(v_deadline, coalesce(h.payment_deadline, v_now)) + s.settle_grace
          from live
         where h.id = live.id
        returning h.id, h.resource_id, h.settle_deadline, h.payment_deadline, live.old_state
    ), logged as (
        insert into hold_events (hold_id, kind, from_state, to_state, actor, detail)
        select moved.id, 'settling', moved.old_state, 'awaiting_payment', p_actor,
               jsonb_build_object('method', v_method, 'settle_deadline', moved.settle_deadline,
                                  'payment_deadline', moved.payment_deadline)
          from moved
    )
    -- a line that was not paying yet has a deadline now
    update resources x
       set next_deadline = least(x.next_deadline, m.deadline), updated_at = v_now
      from (select moved.resource_id, min(moved.payment_deadline) as deadline
              from moved group by moved.resource_id) m
     where x.id = m.resource_id;
    return query
        select 'settling', v_purchase, min(h.settle_method), min(h.settle_deadline), min(h.payment_deadline)
          from holds h where h.purchase_id = v_purchase;
end;
$$;

-- The one rule for late money: a payment for a purchase that ended.
-- A purchase that was released (someone let it go on purpose) is never
-- claimed again. One that expired is claimed again only if every line
-- fits now and nobody has a better right to its units: a resource with a
-- waiting list or an undrawn queue refuses (its entries keep priority),
-- and units held for anyone else are not free. All or nothing, under the
-- purchase's resource locks (ascending id). The claim is a new purchase
-- whose lines are confirmed at once with the payment; the ended holds stay
-- ended, and the payment's claim moves to the new purchase, so one
-- payment still buys one purchase.
create function hf_claim_again(p_id uuid, p_payment_ref text, p_actor text default 'payment')
returns table (status text, purchase_id uuid, resource_id text, available integer)
language plpgsql as $$
declare
    v_purchase uuid;
    v_now timestamptz;
    v_shape purchase_shape;
    v_other uuid;
    v_new uuid;
    l record;
    r resources;
begin
    if p_payment_ref is null or length(p_payment_ref) not between 1 and 255 then
        perform hf_bad_input('payment reference must be 1 to 255 characters');
    end if;
    if p_actor is null or length(p_actor) not between 1 and 200 then
        perform hf_bad_input('actor must be 1 to 200 characters');
    end if;
    v_purchase := hf_lock_purchase(p_id);
    if v_purchase is null then
        return query select 'not_found', p_id, null::text, null::integer;
        return;
    end if;
    v_now := clock_timestamp();

    -- the payment's claim: hf_confirm_many made it for this purchase when
    -- it refused the money; another purchase's claim is another story
    select x.purchase_id into v_other from payment_refs x where x.payment_ref = p_payment_ref;
    if found and v_other <> v_purchase then
        if exists (select 1 from holds h
                    where h.purchase_id = v_other
                      and h.reclaims in (select e.id from holds e where e.purchase_id = v_purchase)) then
            return query select 'already_claimed', v_other, null::text, null::integer;
        else
            return query select 'payment_ref_in_use', v_other, null::text, null::integer;
        end if;
        return;
    end if;

    v_shape := hf_purchase_shape(v_purchase, v_now);
    if v_shape.released > 0 then
        return query select 'released', v_purchase, null::text, null::integer;
        return;
    end if;
    if v_shape.expired <> v_shape.lines then
        return query select 'not_ended', v_purchase, null::text, null::integer;
        return;
    end if;

    for l in select h.resource_id, h.qty from holds h
              where h.purchase_id = v_purchase order by h.resource_id loop
        select * into r from resources x where x.id = l.resource_id;
        -- expired plain holds count as free, as for any hold (their units
        -- go to the line first, in this transaction)
        if r.total - r.held - r.sold < l.qty and r.next_expiry <= v_now then
            perform hf_expire_due_plain(l.resource_id, v_now, 'lazy-expiry', null);
            select * into r from resources x where x.id = l.resource_id;
        end if;
        if hf_line_waits(l.resource_id, v_now) then
            return query select 'line_waiting', v_purchase, l.resource_id, r.total - r.held - r.sold;
            return;
        end if;
        if r.total - r.held - r.sold < l.qty then
            return query select 'sold_out', v_purchase, l.resource_id, r.total - r.held - r.sold;
            return;
        end if;
    end loop;

    v_new := gen_random_uuid();
    insert into payment_refs as x (payment_ref, purchase_id) values (p_payment_ref, v_new)
    on conflict (payment_ref) do update set purchase_id = excluded.purchase_id;
    with claimed as (
        insert into holds (id, basket_id, resource_id, account_id, qty, state, expires_at,
                           payment_ref, confirmed_at, reclaims)
        select hf_uuid_v7(), v_new, h.resource_id, h.account_id, h.qty, 'confirmed', v_now,
               p_payment_ref, v_now, h.id
          from holds h where h.purchase_id = v_purchase
        returning holds.id, holds.resource_id, holds.qty, holds.reclaims
    ), logged as (
        insert into hold_events (hold_id, kind, to_state, actor, detail)
        select c.id, 'reclaimed', 'confirmed', p_actor,
               jsonb_build_object('payment_ref', p_payment_ref, 'reclaims', c.reclaims, 'qty', c.qty)
          from claimed c
    )
    update resources x
       set sold = x.sold + c.qty, updated_at = v_now
      from claimed c
     where x.id = c.resource_id;
    return query select 'claimed', v_new, null::text, null::integer;
end;
$$;

-- Whether an ended purchase could be claimed again now (hf_claim_again's
-- test, read without locks: a hint for deciding whether to capture an
-- authorisation at all; hf_claim_again decides).
create function hf_claimable(p_purchase uuid) returns boolean
language sql stable as $$
    select coalesce(bool_and(
               h.state = 'expired'
               and not hf_line_waits(h.resource_id, now())
               and (select r.total - r.held - r.sold
                           + (select coalesce(sum(d.qty), 0) from holds d
                               where d.resource_id = r.id and d.state = 'held' and d.expires_at <= now())
                      from resources r where r.id = h.resource_id) >= h.qty), false)
      from holds h
     where h.purchase_id = p_purchase;
$$;

-- An order as the JSON API and the order events show it: hf_webhook_order
-- and what settling and the late-money rule say of it.
create function hf_order_view(p_order uuid) returns jsonb
language sql stable as $$
    select hf_webhook_order(o.id)
           || jsonb_build_object(
                  'settling', case when o.settle_method is not null
                                   then jsonb_build_object('method', o.settle_method,
                                                           'until', o.settling_until) end,
                  'late_money', o.late_money)
      from orders o where o.id = p_order
$$;

-- order.settling, and order.paid for an expired order whose money was
-- claimed again: the state trigger of 0060, widened.
create or replace function hf_webhook_order_state() returns trigger
language plpgsql as $$
begin
    perform hf_webhook_event('order.' || new.state,
                             jsonb_build_object('order', hf_order_view(new.id)));
    return null;
end;
$$;
drop trigger orders_webhook_state on orders;
create trigger orders_webhook_state
    after update of state on orders
    for each row
    when (old.state is distinct from new.state
          and old.state in ('pending', 'settling', 'expired')
          and new.state in ('settling', 'paid', 'expired', 'cancelled'))
    execute function hf_webhook_order_state();
