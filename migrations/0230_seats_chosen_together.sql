-- Seats at general admission's speed (issue 45). A seated on-sale is a
-- crowd asking one event's sections for "the best n together"; it went in
-- small calls (one queue a section), each line a scan of its section under
-- the section's lock, each payment start a call of its own. Now:
--
-- 1. hf_seats_free: a batch of checkouts reads its sections' free seats
--    once, under its locks, and the application chooses every
--    best-available line of the batch against that read
--    (src/catalogue/kinds/seats/best.rs, the rule of hf_seat_best);
-- 2. hf_start_checkouts pins those seats as chosen, in the same
--    transaction (it takes the same locks again: re-entrant);
-- 3. hf_attach_payments takes each order's resource, so one call starts
--    the payments of an event's sections together;
-- 4. the pins' guard runs once a statement, not once a pin.
--
-- The locks of hf_seats_free are taken in hf_start_checkouts' order, so a
-- batch that read first waits for nobody that waits for it: the
-- e-mails' and addresses' keys, then every resource of the batch,
-- ascending.
create function hf_seats_free(p_limit_keys text[], p_resources text[])
returns table (resource_id text, splits boolean, first_fit boolean, middle float8, id bigint, label text,
               row_rank integer, run integer, pos integer, x integer)
language plpgsql as $$
begin
    if coalesce(cardinality(p_resources), 0) not between 1 and 10000 then
        perform hf_bad_input('read the free seats of 1 to 10000 resources');
    end if;
    perform hf_limit_lock(k.k)
       from (select distinct k from unnest(p_limit_keys) k where k is not null order by k) k;
    perform 1 from resources r where r.id = any (p_resources) order by r.id for no key update;
    -- a section's expired holds end, so their seats are free to choose
    perform hf_seat_expire_due(x.resource_id)
       from seat_sections x where x.resource_id = any (p_resources) order by x.resource_id;
    return query
        with section as materialized (
            -- the middle of each section's width, once a section
            select x.product_id, x.resource_id, x.chooser = 'first_fit' as first_fit,
                   (select (min(a.x) + max(a.x)) / 2.0::float8
                      from seats a where a.section = x.product_id) as middle
              from seat_sections x
             where x.resource_id = any (p_resources))
        select x.resource_id, coalesce((select t.splits from seating_settings t), false),
               x.first_fit, x.middle, s.id, s.label, s.row_rank, s.run, s.pos, s.x
          from section x
          join seats s on s.section = x.product_id
         where s.state = 'open' and s.access = 'none'
           and not exists (select 1 from seat_pins p where p.seat_id = s.id and p.live)
         order by x.resource_id, s.row_rank, s.run, s.pos;
end;
$$;

-- A line's best seats chosen by its batch: hf_start_checkouts takes their
-- ids (`chosen`, with their labels as `seats`) and pins them as they are,
-- instead of asking hf_seat_best for them (about 1 ms a line under the
-- locks); a line the batch found no stretch for comes with the split it
-- offers (`apart`: `offers`, `split_allowed`), instead of hf_seat_choose's
-- search for one (20 ms). The batch chose them as if every checkout
-- before started with its seats and no other seat was taken; in a
-- section where that stops being so (a checkout before was refused, or
-- was given seats chosen here, or a chosen seat is already given), the
-- later lines are chosen here by hf_seat_choose, as before. Everything
-- else is as 0210_one_checkout_path.sql wrote it.
create or replace function hf_start_checkouts(p_checkouts jsonb)
 RETURNS TABLE(status text, order_id uuid, hold_id uuid, number text, created_at timestamp with time zone, detail jsonb)
 LANGUAGE plpgsql
AS $$
declare
    s inventory_settings;
    v_n integer;
    v_now timestamptz;
    -- the checkouts, by position
    c_key text[]; c_account text[]; c_token text[]; c_name text[]; c_email text[];
    c_phone text[]; c_currency text[]; c_provider text[]; c_email_key text[];
    c_address text[]; c_address_cap integer[]; c_voucher text[];
    c_first integer[];      -- where its key is first in the batch
    c_amount bigint[]; c_discount bigint[];
    c_pins boolean[];       -- it has seat or table lines
    c_existing uuid[];      -- the order its key has already
    c_named boolean[];      -- its seats name a line
    -- where each checkout's lines and holds lie in the arrays below
    c_l1 integer[]; c_l2 integer[]; c_h1 integer[]; c_h2 integer[];
    -- the lines, by checkout and then as given
    l_ck integer[]; l_product text[]; l_name text[]; l_qty integer[]; l_price bigint[];
    l_paid bigint[]; l_resource text[]; l_email_cap integer[]; l_claim text[];
    l_seats text[]; l_together boolean[];
    l_chosen text[];        -- its seats' ids, when the batch chose them (hf_seats_free)
    l_apart text[];         -- or the split the batch offers instead
    -- sections whose lines the batch chose for can no longer be trusted
    v_diverged text[] := '{}';
    l_h integer[];          -- the hold of its resource, in h_
    l_egroup integer[];     -- its (e-mail, product) when the e-mail is capped
    l_email_used integer[]; -- what that e-mail holds of it in pending orders
    l_named text[];         -- its name once its seats are chosen
    -- a party's table: the room, the stay, the tables, the booking's terms
    l_room text[]; l_during tstzrange[]; l_tables jsonb[]; l_deposit bigint[];
    l_cancel timestamptz[];
    -- the holds each checkout asks for: its lines' units and the
    -- voucher's uses of one resource, summed
    h_ck integer[]; h_resource text[]; h_qty integer[]; h_units integer[];
    h_use text[];           -- a voucher's use: the refusal when it is short
    h_r integer[];          -- its resource, in r_
    h_agroup integer[];     -- its (address, resource) when the address is capped
    h_address_used integer[];
    h_id uuid[];
    -- the resources of the batch, ascending, and what they have left
    r_id text[]; r_left integer[]; r_granted integer[]; r_next timestamptz[];
    r_swept boolean[];
    -- what the batch granted so far, per capped group
    v_egranted integer[]; v_agranted integer[];
    -- seats and tables the batch's started checkouts chose
    sp_l integer[] := '{}'; sp_seat bigint[] := '{}';
    tp_room text[] := '{}'; tp_table text[] := '{}'; tp_during tstzrange[] := '{}';
    v_one_section boolean;
    v_capped boolean;
    -- checkouts refused before they are looked at: their key holds units
    -- outside any order, a resource is unknown, a sale is not open
    v_key_used integer[]; v_unknown_ck integer[]; v_off_ck integer[];
    v_off_sale text[];
    -- the answers
    v_status text[]; v_order uuid[]; v_purchase uuid[]; v_basket uuid[]; v_detail jsonb[];
    -- one checkout's: its seats (kept when it starts), what refuses it
    v_seats_l integer[]; v_seats_id bigint[];
    v_short text[]; v_want integer[]; v_left integer[]; v_refusal text;
    v_found uuid;
    v_room integer; v_address_room integer; v_mine integer; v_count integer; v_mark integer;
    v_written integer; v_started integer;
    v_exclude bigint[];
    v_chosen bigint[];
    v_labels text[];
    v_terms record;
    v_tables text[];
    v_during tstzrange;
    v_r integer;
    v_choice record;
    v_row record;
begin
    v_n := coalesce(jsonb_array_length(p_checkouts), 0);
    if v_n not between 1 and 1000 then
        perform hf_bad_input(format('a batch starts 1 to 1000 checkouts, got %s', v_n));
    end if;
    select * into s from inventory_settings;

    -- The checkouts, their lines and their holds, read once; a key seen
    -- earlier in the batch is its first's.
    select array_agg(x.key order by x.n), array_agg(x.doc->>'account' order by x.n),
           array_agg(x.doc->>'token' order by x.n), array_agg(x.doc->>'name' order by x.n),
           array_agg(x.doc->>'email' order by x.n), array_agg(x.doc->>'phone' order by x.n),
           array_agg(x.doc->>'currency' order by x.n), array_agg(x.doc->>'provider' order by x.n),
           array_agg(x.doc->>'email_key' order by x.n), array_agg(x.doc->>'address' order by x.n),
           array_agg((x.doc->>'address_cap')::integer order by x.n),
           array_agg(x.doc->>'voucher' order by x.n), array_agg(x.first order by x.n)
      into c_key, c_account, c_token, c_name, c_email, c_phone, c_currency, c_provider,
           c_email_key, c_address, c_address_cap, c_voucher, c_first
      from (select e.doc, e.n, e.doc->>'key' as key,
                   (min(e.n) over (partition by e.doc->>'key'))::integer as first
              from jsonb_array_elements(p_checkouts) with ordinality as e(doc, n)) x;
    if exists (select 1 from unnest(c_key, c_account, c_token, c_name, c_email, c_currency,
                                    c_provider) as c(key, account, token, name, email, currency,
                                                     provider)
                where c.key is null or length(c.key) not between 1 and 255
                   or c.account is null or length(c.account) not between 1 and 200
                   or c.token is null or c.name is null or c.email is null
                   or c.currency is null or c.provider is null)
       or exists (select 1 from jsonb_array_elements(p_checkouts) c
                   where coalesce(jsonb_typeof(c->'lines'), '') <> 'array'
                      or jsonb_array_length(c->'lines') not between 1 and 100) then
        perform hf_bad_input('every checkout needs its key (1 to 255 characters), its account '
                             '(1 to 200), its token, customer, currency, provider and 1 to 100 lines');
    end if;
    select array_agg(x.ck order by x.ck, x.k), array_agg(x.line->>'product' order by x.ck, x.k),
           array_agg(x.line->>'name' order by x.ck, x.k),
           array_agg((x.line->>'qty')::integer order by x.ck, x.k),
           array_agg((x.line->>'unit_price')::bigint order by x.ck, x.k),
           array_agg(coalesce((x.line->>'paid')::bigint,
                              (x.line->>'unit_price')::bigint * (x.line->>'qty')::integer)
                     order by x.ck, x.k),
           array_agg(x.line->>'resource' order by x.ck, x.k),
           array_agg((x.line->>'email_cap')::integer order by x.ck, x.k),
           array_agg(coalesce(x.line->>'claim', 'units') order by x.ck, x.k),
           array_agg(case jsonb_typeof(x.line->'seats') when 'array' then (x.line->'seats')::text end
                     order by x.ck, x.k),
           array_agg(coalesce((x.line->>'together')::boolean, true) order by x.ck, x.k),
           array_agg(case jsonb_typeof(x.line->'chosen') when 'array' then (x.line->'chosen')::text end
                     order by x.ck, x.k),
           array_agg(case jsonb_typeof(x.line->'apart') when 'object' then (x.line->'apart')::text end
                     order by x.ck, x.k)
      into l_ck, l_product, l_name, l_qty, l_price, l_paid, l_resource, l_email_cap, l_claim,
           l_seats, l_together, l_chosen, l_apart
      from (select c.n::integer as ck, l.line, l.k
              from jsonb_array_elements(p_checkouts) with ordinality as c(doc, n),
                   jsonb_array_elements(c.doc->'lines') with ordinality as l(line, k)) x;
    if exists (select 1 from unnest(l_product, l_name, l_resource, l_qty, l_price, l_paid, l_claim)
                               as l(product, name, resource, qty, price, paid, claim)
                where l.product is null or l.name is null or l.resource is null
                   or l.qty is null or l.qty <= 0 or l.price is null or l.price < 0
                   or l.paid < 0 or l.claim not in ('units', 'seats', 'table'))
       or exists (select 1 from unnest(l_ck, l_product) as x(ck, product)
                   group by x.ck, x.product having count(*) > 1) then
        perform hf_bad_input('every line needs a product, a name, a resource, a positive qty, '
                             'a price and a claim (units, seats or table), each product once');
    end if;
    -- per checkout: its lines, its amount and discount, whether it pins
    select array_agg(x.l1 order by x.ck), array_agg(x.l2 order by x.ck),
           array_agg(x.amount order by x.ck), array_agg(x.discount order by x.ck),
           array_agg(x.pins order by x.ck)
      into c_l1, c_l2, c_amount, c_discount, c_pins
      from (select l.ck, min(l.k)::integer as l1, max(l.k)::integer as l2,
                   sum(l.paid) as amount, sum(l.price * l.qty - l.paid) as discount,
                   bool_or(l.claim <> 'units') as pins
              from unnest(l_ck, l_qty, l_price, l_paid, l_claim) with ordinality
                   as l(ck, qty, price, paid, claim, k)
             group by l.ck) x;
    -- its holds: the lines' units and the voucher's uses, per resource
    select array_agg(h.ck order by h.ck, h.resource), array_agg(h.resource order by h.ck, h.resource),
           array_agg(h.qty order by h.ck, h.resource),
           array_agg(coalesce(h.units, 0) order by h.ck, h.resource),
           array_agg(h.use_ order by h.ck, h.resource)
      into h_ck, h_resource, h_qty, h_units, h_use
      from (select u.ck, u.resource, sum(u.qty)::integer as qty,
                   (sum(u.qty) filter (where u.use_ is null))::integer as units,
                   max(u.use_) as use_
              from (select l.ck, l.resource, l.qty, null::text as use_
                      from unnest(l_ck, l_resource, l_qty) as l(ck, resource, qty)
                    union all
                    select c.n::integer, u.use->>'resource', 1, coalesce(u.use->>'refusal', 'used_up')
                      from jsonb_array_elements(p_checkouts) with ordinality as c(doc, n),
                           jsonb_array_elements(c.doc->'uses') as u(use)) u
             group by u.ck, u.resource) h;
    if exists (select 1 from unnest(h_resource) as x(id) where x.id is null) then
        perform hf_bad_input('a voucher''s use needs its resource');
    end if;
    select array_agg(x.h1 order by x.ck), array_agg(x.h2 order by x.ck)
      into c_h1, c_h2
      from (select h.ck, min(h.n)::integer as h1, max(h.n)::integer as h2
              from unnest(h_ck) with ordinality as h(ck, n) group by h.ck) x;
    select array_agg(h.n::integer order by l.k)
      into l_h
      from unnest(l_ck, l_resource) with ordinality as l(ck, resource, k)
      join unnest(h_ck, h_resource) with ordinality as h(ck, resource, n)
        on h.ck = l.ck and h.resource = l.resource;
    select array_agg(distinct x.id order by x.id) into r_id from unnest(h_resource) as x(id);
    select array_agg(r.n::integer order by h.n)
      into h_r
      from unnest(h_resource) with ordinality as h(resource, n)
      join unnest(r_id) with ordinality as r(id, n) on r.id = h.resource;
    v_one_section := (select count(distinct l.resource) from unnest(l_resource, l_claim) l(resource, claim)
                       where l.claim = 'seats') <= 1;
    v_capped := exists (select 1 from unnest(l_ck, l_email_cap) as l(ck, cap)
                         where l.cap is not null and c_email_key[l.ck] is not null)
                or exists (select 1 from unnest(c_address_cap, c_address) as a(cap, address)
                            where a.cap is not null and a.address is not null);

    -- Lock: every e-mail and address of the batch, in one order, before
    -- any order row and before any resource.
    perform hf_limit_lock(k.k)
       from (select distinct k from unnest(c_email_key || c_address) k
              where k is not null order by k) k;
    -- Lock: every resource of the batch, ascending id.
    perform 1 from resources x where x.id = any (r_id) order by x.id for no key update;
    -- Lock: with a cap across resources, every account of the batch, in
    -- the order of their lock keys (as hf_hold_many takes them).
    if s.account_cap is not null and s.cap_scope = 'global' then
        perform pg_advisory_xact_lock(k)
           from (select distinct hashtextextended('holdfast.account:' || a, 0) as k
                   from unnest(c_account) a order by 1) keys;
    end if;
    -- Lock: every room a party of the batch is seated in, ascending id.
    if 'table' = any (l_claim) then
        perform 1 from dining_rooms d
         where d.collection in (select t.room from dining_times t
                                 join unnest(l_product, l_claim) as l(product, claim)
                                   on l.product = t.product_id and l.claim = 'table')
         order by d.collection for no key update;
    end if;
    v_now := clock_timestamp();
    -- a section's expired holds end, so their seats are free to choose
    if 'seats' = any (l_claim) then
        perform hf_seat_expire_due(x.r)
           from (select distinct l.resource as r from unnest(l_resource, l_claim) as l(resource, claim)
                  where l.claim = 'seats' order by 1) as x(r);
    end if;

    -- What the locks let this call see, read once for the batch: each
    -- resource's counters, the order each key has, the keys holding units
    -- outside any order, the products whose sale is not open by this
    -- database's clock (the same for every process).
    select array_agg(x.total - x.held - x.sold order by r.n), array_agg(x.next_expiry order by r.n)
      into r_left, r_next
      from unnest(r_id) with ordinality as r(id, n) left join resources x on x.id = r.id;
    r_granted := array_fill(0, array[cardinality(r_id)]);
    r_swept := array_fill(false, array[cardinality(r_id)]);
    select array_agg(o.id order by c.n)
      into c_existing
      from unnest(c_key) with ordinality as c(key, n) left join orders o on o.checkout_key = c.key;
    select coalesce(array_agg(distinct h.ck), '{}')
      into v_key_used
      from unnest(h_ck, h_resource) as h(ck, resource)
      join holds x on x.resource_id = h.resource and x.account_id = c_account[h.ck]
                  and x.idempotency_key = c_key[h.ck];
    select coalesce(array_agg(distinct h.ck), '{}')
      into v_unknown_ck
      from unnest(h_ck, h_r) as h(ck, r) where r_left[h.r] is null;
    select coalesce(array_agg(distinct p.id), '{}'), coalesce(array_agg(distinct l.ck), '{}')
      into v_off_sale, v_off_ck
      from unnest(l_ck, l_product) as l(ck, product)
      join products p on p.id = l.product
     where (p.sale_opens_at is not null and p.sale_opens_at > now())
        or (p.sale_closes_at is not null and p.sale_closes_at <= now());

    -- What each capped e-mail holds of a product, and each capped address
    -- of a resource, in pending orders: one statement each for the whole
    -- batch (a call per checkout was most of a batch's time), with the
    -- group its checkouts' grants are counted in.
    if v_capped then
        select array_agg(coalesce(u.used, 0) order by x.k), array_agg(x.g order by x.k)
          into l_email_used, l_egroup
          from (select l.k, c_email_key[l.ck] as email_key, l.product,
                       case when l.cap is not null and c_email_key[l.ck] is not null
                            then dense_rank() over (order by c_email_key[l.ck], l.product)
                       end as g
                  from unnest(l_ck, l_product, l_email_cap) with ordinality
                       as l(ck, product, cap, k)) x
          left join lateral (
               select sum(l.qty)::integer as used
                 from orders o join order_lines l on l.order_id = o.id
                where x.g is not null and o.email_key = x.email_key
                  and o.state in ('pending', 'settling') and l.product_id = x.product
                  and hf_purchase_live(o.hold_id)) u on true;
        select array_agg(coalesce(u.used, 0) order by x.n), array_agg(x.g order by x.n)
          into h_address_used, h_agroup
          from (select h.n, c_address[h.ck] as address, h.resource,
                       case when c_address_cap[h.ck] is not null
                                 and c_address[h.ck] is not null and h.use_ is null
                            then dense_rank() over (order by c_address[h.ck], h.resource)
                       end as g
                  from unnest(h_ck, h_resource, h_use) with ordinality as h(ck, resource, use_, n)) x
          left join lateral (
               select sum(l.qty)::integer as used
                 from orders o join order_lines l on l.order_id = o.id
                 join products p on p.id = l.product_id
                where x.g is not null and o.client_address = x.address
                  and o.state in ('pending', 'settling') and p.resource_id = x.resource
                  and hf_purchase_live(o.hold_id)) u on true;
        v_egranted := array_fill(0, array[cardinality(l_ck)]);
        v_agranted := array_fill(0, array[cardinality(h_ck)]);
    end if;

    v_status := array_fill(null::text, array[v_n]);
    v_order := array_fill(null::uuid, array[v_n]);
    v_basket := array_fill(null::uuid, array[v_n]);
    v_detail := array_fill(null::jsonb, array[v_n]);
    c_named := array_fill(false, array[v_n]);
    l_named := l_name;
    if true = any (c_pins) then
        l_room := array_fill(null::text, array[cardinality(l_ck)]);
        l_during := array_fill(null::tstzrange, array[cardinality(l_ck)]);
        l_tables := array_fill(null::jsonb, array[cardinality(l_ck)]);
        l_deposit := array_fill(null::bigint, array[cardinality(l_ck)]);
        l_cancel := array_fill(null::timestamptz, array[cardinality(l_ck)]);
    end if;

    -- Each checkout in arrival order, against what the ones before it in
    -- the batch were granted: all of it, or nothing.
    <<checkouts>>
    for i in 1 .. v_n loop
        -- The batch chose its best seats before this call, in this order,
        -- as if every checkout before this one started with the seats it
        -- chose and no other seat was taken. When the one before did not
        -- start (the seats chosen for it stay free) or started with seats
        -- chosen here (named ones), its sections' later lines are chosen
        -- here (hf_seat_choose), as the seats really stand.
        if i > 1 then
            v_diverged := v_diverged || array(
                select l_resource[k] from generate_series(c_l1[i - 1], c_l2[i - 1]) k
                 where l_claim[k] = 'seats'
                   and case when v_status[i - 1] = 'started' then l_chosen[k] is null
                            else l_chosen[k] is not null end);
        end if;
        -- a form repeated in this batch is its first's, answered at the end
        continue when c_first[i] <> i;
        if c_existing[i] is not null then
            v_status[i] := 'already_started';
            v_order[i] := c_existing[i];
            continue;
        end if;
        -- a hold outside any order has the form's key: not this checkout's
        if i = any (v_key_used) then
            v_status[i] := 'key_in_use';
            continue;
        end if;
        if i = any (v_unknown_ck) then
            v_status[i] := 'unknown_products';
            v_detail[i] := jsonb_build_object('products', to_jsonb(array(
                select l_product[k] from generate_series(c_l1[i], c_l2[i]) k
                 where r_left[h_r[l_h[k]]] is null order by k)));
            continue;
        end if;
        if i = any (v_off_ck) then
            v_status[i] := 'not_on_sale';
            v_detail[i] := jsonb_build_object('lines', (
                select jsonb_agg(jsonb_build_object('product', p.id, 'opens_at', p.sale_opens_at,
                                                    'closes_at', p.sale_closes_at) order by p.id)
                  from products p
                 where p.id = any (l_product[c_l1[i] : c_l2[i]]) and p.id = any (v_off_sale)));
            continue;
        end if;

        v_short := '{}';
        v_want := '{}';
        v_left := '{}';
        -- the fair-sale limits: what the e-mail holds of each product and
        -- the address of each resource, with the batch's grants before it
        if v_capped then
            for k in c_l1[i] .. c_l2[i] loop
                v_room := null;
                if l_egroup[k] is not null then
                    v_room := l_email_cap[k] - l_email_used[k] - v_egranted[l_egroup[k]];
                end if;
                if h_agroup[l_h[k]] is not null then
                    -- the checkout's own lines on the resource count together
                    v_address_room := c_address_cap[i] - h_address_used[l_h[k]]
                                      - v_agranted[h_agroup[l_h[k]]] - (h_units[l_h[k]] - l_qty[k]);
                    v_room := least(coalesce(v_room, v_address_room), v_address_room);
                end if;
                if l_qty[k] > v_room then
                    v_short := v_short || l_product[k];
                    v_want := v_want || l_qty[k];
                    v_left := v_left || v_room;
                end if;
            end loop;
        end if;
        -- the engine's cap per account (inventory_settings), with the
        -- batch's grants to the same account
        if cardinality(v_short) = 0 and s.account_cap is not null then
            for h in c_h1[i] .. c_h2[i] loop
                select coalesce(sum(x.qty), 0) into v_mine from holds x
                 where x.account_id = c_account[i]
                   and (s.cap_scope = 'global' or x.resource_id = h_resource[h])
                   and (x.state = 'awaiting_payment' or (x.state = 'held' and x.expires_at > v_now));
                select v_mine + coalesce(sum(g.qty), 0) into v_mine
                  from unnest(h_ck, h_resource, h_qty) as g(ck, resource, qty)
                 where v_status[g.ck] = 'started' and c_account[g.ck] = c_account[i]
                   and (s.cap_scope = 'global' or g.resource = h_resource[h]);
                select case when s.cap_scope = 'global' then sum(h_qty[g]) else h_qty[h] end
                  into v_count
                  from generate_series(c_h1[i], c_h2[i]) g;
                if v_mine + v_count > s.account_cap then
                    select array_agg(l_product[k] order by k), array_agg(l_qty[k] order by k),
                           array_agg(s.account_cap - v_mine)
                      into v_short, v_want, v_left
                      from generate_series(c_l1[i], c_l2[i]) k
                     where s.cap_scope = 'global' or l_resource[k] = h_resource[h];
                    -- a voucher's use carries no line: every line goes
                    -- with it (an empty list would read as no refusal)
                    if v_short is null then
                        select array_agg(l_product[k] order by k), array_agg(l_qty[k] order by k),
                               array_agg(s.account_cap - v_mine)
                          into v_short, v_want, v_left
                          from generate_series(c_l1[i], c_l2[i]) k;
                    end if;
                    exit;
                end if;
            end loop;
        end if;
        if cardinality(v_short) > 0 then
            v_status[i] := 'over_limit';
            v_detail[i] := jsonb_build_object('lines', hf_short_lines(v_short, v_want, v_left));
            continue;
        end if;

        -- the units: what each resource has left after the batch's grants
        -- (expired holds count as free: looked for once, when needed and
        -- due)
        v_refusal := null;
        for h in c_h1[i] .. c_h2[i] loop
            v_r := h_r[h];
            if r_left[v_r] < h_qty[h] and not r_swept[v_r] and r_next[v_r] <= v_now then
                perform hf_expire_due_plain(r_id[v_r], v_now, 'lazy-expiry', null);
                r_swept[v_r] := true;
                select x.total - x.held - x.sold into v_room from resources x where x.id = r_id[v_r];
                r_left[v_r] := v_room - r_granted[v_r];
            end if;
            continue when r_left[v_r] >= h_qty[h];
            if h_use[h] is not null then
                -- the buyer's own use says more than the voucher's last
                v_refusal := case when v_refusal = 'used_by_you' then v_refusal else h_use[h] end;
            else
                for k in c_l1[i] .. c_l2[i] loop
                    if l_h[k] = h then
                        v_short := v_short || l_product[k];
                        v_want := v_want || l_qty[k];
                        v_left := v_left || r_left[v_r];
                    end if;
                end loop;
            end if;
        end loop;
        if v_refusal is not null then
            v_status[i] := 'bad_voucher';
            v_detail[i] := jsonb_build_object('refusal', v_refusal);
            continue;
        elsif cardinality(v_short) > 0 then
            v_status[i] := 'sold_out';
            v_detail[i] := jsonb_build_object('lines', hf_short_lines(v_short, v_want, v_left));
            continue;
        end if;

        v_seats_l := '{}';
        v_seats_id := '{}';
        v_mark := cardinality(tp_room);
        for k in c_l1[i] .. c_l2[i] loop
            exit when not c_pins[i];
            if l_claim[k] = 'seats' and l_chosen[k] is not null
               and not (l_resource[k] = any (v_diverged))
               and not (array(select jsonb_array_elements_text(l_chosen[k]::jsonb)::bigint)
                        && (sp_seat || v_seats_id)) then
                -- its best seats, chosen by the batch from its read of the
                -- free seats under these locks (hf_seats_free), labels in
                -- the plan's order: the application's own choice, never a
                -- client's (seat_pins_live and the pins' guard still
                -- refuse a seat taken, off sale or of another section)
                v_labels := array(select jsonb_array_elements_text(l_seats[k]::jsonb));
                v_chosen := array(select jsonb_array_elements_text(l_chosen[k]::jsonb)::bigint);
                if cardinality(v_chosen) <> l_qty[k] or cardinality(v_labels) <> l_qty[k] then
                    perform hf_bad_input(format('%s: chosen seats must be as many as its qty',
                                                l_product[k]));
                end if;
                v_seats_l := v_seats_l || array_fill(k, array[l_qty[k]]);
                v_seats_id := v_seats_id || v_chosen;
                l_named[k] := l_name[k] || ' — ' || array_to_string(v_labels, ', ');
                c_named[i] := true;
                continue;
            elsif l_claim[k] = 'seats' and l_apart[k] is not null
                  and not (l_resource[k] = any (v_diverged)) then
                -- no stretch of the batch's read holds them: the best
                -- split it found, offered (as hf_seat_choose offers it)
                v_status[i] := 'not_together';
                v_detail[i] := jsonb_build_object(
                    'product', l_product[k], 'seats', '[]'::jsonb,
                    'offers', coalesce(l_apart[k]::jsonb->'offers', '[]'),
                    'split_allowed', coalesce((l_apart[k]::jsonb->>'split_allowed')::boolean, false));
            elsif l_claim[k] = 'seats' then
                if l_chosen[k] is not null or l_apart[k] is not null then
                    -- the batch's choice no longer holds in this section
                    v_diverged := v_diverged || l_resource[k];
                end if;
                -- its seats, chosen under its section's lock around the
                -- seats the batch chose before
                if v_one_section then
                    v_exclude := sp_seat;
                else
                    v_exclude := array(select sp_seat[x] from generate_subscripts(sp_seat, 1) x
                                        where l_resource[sp_l[x]] = l_resource[k]);
                end if;
                -- (the labels of seats the batch chose are not a shopper's:
                -- that line asks for the best)
                v_labels := case when l_seats[k] is not null and l_chosen[k] is null
                                 then array(select jsonb_array_elements_text(l_seats[k]::jsonb)) end;
                select * into v_choice from hf_seat_choose(l_resource[k], v_labels, l_qty[k],
                                                           l_together[k], v_exclude);
                if v_choice.status = 'chosen' then
                    v_seats_l := v_seats_l || array_fill(k, array[cardinality(v_choice.seat_ids)]);
                    v_seats_id := v_seats_id || v_choice.seat_ids;
                    l_named[k] := l_name[k] || ' — ' || array_to_string(v_choice.labels, ', ');
                    c_named[i] := true;
                    continue;
                end if;
                v_status[i] := v_choice.status;
                if v_choice.status = 'sold_out' then
                    v_detail[i] := jsonb_build_object('lines', hf_short_lines(
                        array[l_product[k]], array[l_qty[k]], array[v_choice.free]));
                else
                    -- seats_taken, unknown_seats, not_together: the seats,
                    -- and others offered
                    v_detail[i] := jsonb_build_object(
                        'product', l_product[k], 'seats', to_jsonb(coalesce(v_choice.taken, '{}')),
                        'offers', coalesce(v_choice.offers, '[]'),
                        'split_allowed', coalesce(v_choice.split_allowed, false));
                end if;
            elsif l_claim[k] = 'table' then
                -- its party: the table or joined set its room gives it for
                -- its stay (hf_free_sets, the best first), around the
                -- tables the batch chose before
                v_tables := null;
                -- (one row: a product with no dining time reads as nulls)
                select * into v_terms from hf_table_terms(l_product[k], l_qty[k]);
                if v_terms.room is not null then
                    v_during := tstzrange(v_terms.starts_at, v_terms.starts_at + v_terms.turn, '[)');
                    select f.tables into v_tables
                      from hf_free_sets(v_terms.room, l_qty[k], v_during, null)
                           with ordinality as f(set_id, tables, max_party, joined, idle, priority, n)
                     where not exists (select 1 from unnest(tp_room, tp_table, tp_during) as b(room, t, d)
                                        where b.room = v_terms.room and b.t = any (f.tables)
                                          and b.d && v_during)
                     order by f.n
                     limit 1;
                end if;
                if v_tables is not null then
                    l_room[k] := v_terms.room;
                    l_during[k] := v_during;
                    l_tables[k] := to_jsonb(v_tables);
                    l_deposit[k] := v_terms.deposit_per_cover;
                    l_cancel[k] := v_terms.cancel_until;
                    tp_room := tp_room || array_fill(v_terms.room, array[cardinality(v_tables)]);
                    tp_table := tp_table || v_tables;
                    tp_during := tp_during || array_fill(v_during, array[cardinality(v_tables)]);
                    continue;
                end if;
                v_status[i] := 'no_table';
                v_detail[i] := jsonb_build_object('lines', hf_short_lines(
                    array[l_product[k]], array[l_qty[k]], array[0]));
            else
                continue;
            end if;
            -- refused: the tables an earlier line of it chose stay free
            tp_room := tp_room[1 : v_mark];
            tp_table := tp_table[1 : v_mark];
            tp_during := tp_during[1 : v_mark];
            continue checkouts;
        end loop;

        -- granted: its order (and a basket of holds when it holds
        -- several), and what the batch has left for the rest
        v_status[i] := 'started';
        v_order[i] := gen_random_uuid();
        if c_h1[i] <> c_h2[i] then
            v_basket[i] := gen_random_uuid();
        end if;
        for h in c_h1[i] .. c_h2[i] loop
            r_left[h_r[h]] := r_left[h_r[h]] - h_qty[h];
            r_granted[h_r[h]] := r_granted[h_r[h]] + h_qty[h];
            if h_agroup[h] is not null then
                v_agranted[h_agroup[h]] := v_agranted[h_agroup[h]] + h_units[h];
            end if;
        end loop;
        if v_capped then
            for k in c_l1[i] .. c_l2[i] loop
                if l_egroup[k] is not null then
                    v_egranted[l_egroup[k]] := v_egranted[l_egroup[k]] + l_qty[k];
                end if;
            end loop;
        end if;
        if c_pins[i] then
            sp_l := sp_l || v_seats_l;
            sp_seat := sp_seat || v_seats_id;
        end if;
    end loop;

    -- every granted hold's id (time-ordered), and each order's purchase:
    -- its one hold, or its basket
    select array_agg(case when v_status[h.ck] = 'started' then hf_uuid_v7() end order by h.n)
      into h_id
      from unnest(h_ck) with ordinality as h(ck, n);
    select array_agg(coalesce(c.basket, h_id[c.h1]) order by c.n)
      into v_purchase
      from unnest(v_basket, c_h1) with ordinality as c(basket, h1, n);

    -- The orders, in key order (two batches sharing keys wait on each
    -- other's orders in one direction only); a key that gets its order
    -- from a transaction that commits first writes nothing more, and is
    -- that order.
    insert into orders (id, token, checkout_key, customer_name, customer_email, customer_phone,
                        currency, amount_minor, provider, email_key, client_address,
                        voucher_code, discount_minor, hold_id)
    select c.id, c.token, c.key, c.name, c.email, c.phone, c.currency, c.amount, c.provider,
           c.email_key, c.address, c.voucher, c.discount, c.purchase
      from unnest(v_status, v_order, c_token, c_key, c_name, c_email, c_phone, c_currency,
                  c_amount, c_provider, c_email_key, c_address, c_voucher, c_discount, v_purchase)
           with ordinality as c(status, id, token, key, name, email, phone, currency, amount,
                                provider, email_key, address, voucher, discount, purchase, n)
     where c.status = 'started'
     order by c.key, c.n
    on conflict (checkout_key) do nothing;
    get diagnostics v_written = row_count;
    select count(*) into v_started from unnest(v_status) x where x = 'started';
    if v_written < v_started then
        for i in 1 .. v_n loop
            continue when v_status[i] is distinct from 'started'
                       or exists (select 1 from orders o where o.id = v_order[i]);
            select o.id into v_found from orders o where o.checkout_key = c_key[i];
            v_status[i] := 'already_started';
            v_order[i] := v_found;
            v_purchase[i] := null;
        end loop;
    end if;

    -- each started order's lines, its holds and their history, its pins
    -- and its bookings: one statement each for the batch
    insert into order_lines (order_id, product_id, name, qty, unit_price_minor, paid_minor)
    select v_order[l.ck], l.product, l.name, l.qty, l.price, l.paid
      from unnest(l_ck, l_product, l_named, l_qty, l_price, l_paid)
           as l(ck, product, name, qty, price, paid)
     where v_status[l.ck] = 'started';
    insert into holds (id, basket_id, resource_id, account_id, qty, idempotency_key, expires_at)
    select h.id, v_basket[h.ck], h.resource, c_account[h.ck], h.qty, c_key[h.ck], v_now + s.hold_ttl
      from unnest(h_ck, h_id, h_resource, h_qty) as h(ck, id, resource, qty)
     where v_status[h.ck] = 'started';
    insert into hold_events (hold_id, kind, to_state, actor, detail)
    select h.id, 'held', 'held', c_account[h.ck],
           case when v_basket[h.ck] is null
                then jsonb_build_object('qty', h.qty, 'ttl_seconds', extract(epoch from s.hold_ttl))
                else jsonb_build_object('qty', h.qty, 'basket_id', v_basket[h.ck],
                                        'ttl_seconds', extract(epoch from s.hold_ttl)) end
      from unnest(h_ck, h_id, h_qty) as h(ck, id, qty)
     where v_status[h.ck] = 'started';
    -- one counter update per resource; the CHECK still has the last word
    update resources x
       set held = x.held + g.qty, next_expiry = least(x.next_expiry, v_now + s.hold_ttl),
           updated_at = v_now
      from (select h.resource, sum(h.qty) as qty
              from unnest(h_ck, h_resource, h_qty) as h(ck, resource, qty)
             where v_status[h.ck] = 'started'
             group by 1) g
     where x.id = g.resource;
    if cardinality(sp_seat) > 0 then
        insert into seat_pins (seat_id, hold_id)
        select p.seat, h_id[l_h[p.l]]
          from unnest(sp_l, sp_seat) as p(l, seat)
         where v_status[l_ck[p.l]] = 'started';
    end if;
    if cardinality(tp_room) > 0 then
        insert into table_pins (hold_id, room, table_id, during)
        select h_id[l_h[k]], l_room[k], t.id, l_during[k]
          from generate_subscripts(l_ck, 1) k, jsonb_array_elements_text(l_tables[k]) as t(id)
         where l_tables[k] is not null and v_status[l_ck[k]] = 'started';
        insert into bookings (hold_id, order_id, room, product_id, party, starts_at, ends_at,
                              tables, deposit_per_cover_minor, cancel_until)
        select h_id[l_h[k]], v_order[l_ck[k]], l_room[k], l_product[k], l_qty[k],
               lower(l_during[k]), upper(l_during[k]),
               array(select jsonb_array_elements_text(l_tables[k])), l_deposit[k], l_cancel[k]
          from generate_subscripts(l_ck, 1) k
         where l_tables[k] is not null and v_status[l_ck[k]] = 'started';
    end if;

    -- a started order whose seats name its lines says so
    for i in 1 .. v_n loop
        continue when not c_named[i] or v_status[i] is distinct from 'started';
        v_detail[i] := jsonb_build_object('lines', (
            select jsonb_agg(jsonb_build_object('product', l_product[k], 'name', l_named[k])
                             order by k)
              from generate_series(c_l1[i], c_l2[i]) k));
    end loop;
    -- a form sent twice in one batch is its first's: the same order, or
    -- the same refusal
    for i in 1 .. v_n loop
        continue when c_first[i] = i;
        v_r := c_first[i];
        v_status[i] := case when v_status[v_r] = 'started' then 'already_started'
                            else v_status[v_r] end;
        v_order[i] := v_order[v_r];
        v_detail[i] := case when v_status[v_r] = 'started' then null else v_detail[v_r] end;
    end loop;

    return query
        select c.status, c.id, c.purchase, o.number, now(), c.detail
          from unnest(v_status, v_order, v_purchase, v_detail) with ordinality
               as c(status, id, purchase, detail, n)
          left join orders o on o.id = c.id
         order by c.n;
end;
$$;


-- A seated event's payments start together too: the shop combines the
-- payment starts of one event's sections as it combines their checkouts
-- (src/checkout/start_batches.rs), so hf_attach_payments takes each
-- order's resource instead of one for the call. Otherwise as
-- 0013_one_engine.sql wrote it: the orders locked, then every resource,
-- ascending.
-- (The old form stays, for a process of the release before this one
-- still running while the new one has migrated: every order on the one
-- resource.)

create function hf_attach_payments(p_resources text[], p_orders uuid[], p_window_seconds integer[], p_session_ids text[], p_urls text[], p_expires timestamp with time zone[], p_baskets text[])
 RETURNS TABLE(order_id uuid, status text, order_state text)
 LANGUAGE plpgsql
AS $$
declare
    s inventory_settings;
    v_n integer := coalesce(cardinality(p_orders), 0);
    v_now timestamptz;
    v_status text[] := array_fill(null::text, array[v_n]);
    h holds;
    v_hold uuid;
begin
    if v_n not between 1 and 1000 then
        perform hf_bad_input(format('a batch attaches 1 to 1000 payments, got %s', v_n));
    end if;
    if coalesce(cardinality(p_resources), -1) <> v_n
       or coalesce(cardinality(p_window_seconds), -1) <> v_n or coalesce(cardinality(p_session_ids), -1) <> v_n
       or coalesce(cardinality(p_urls), -1) <> v_n or coalesce(cardinality(p_expires), -1) <> v_n
       or coalesce(cardinality(p_baskets), -1) <> v_n then
        perform hf_bad_input('every payment needs each of its fields: arrays of one length');
    end if;
    select * into s from inventory_settings;
    if exists (select 1 from unnest(p_window_seconds) w
                where w is null or w * interval '1 second' <= s.hold_ttl) then
        perform hf_bad_input(format('a payment window must be longer than the hold TTL (%s)', s.hold_ttl));
    end if;

    -- lock: the orders, then the resources, ascending
    perform 1 from orders where id = any(p_orders) order by id for update;
    perform 1 from resources where id = any(p_resources) order by id for no key update;
    v_now := clock_timestamp();

    for i in 1 .. v_n loop
        v_hold := null;
        select o.hold_id into v_hold from orders o where o.id = p_orders[i];
        if v_hold is null then
            v_status[i] := 'not_found';
            continue;
        end if;
        select * into h from holds where id = v_hold;
        if not found then
            -- a basket's id (its lines may lie on other resources) is not
            -- this call's to move; the rest of the batch goes on
            v_status[i] := case when exists (select 1 from holds where purchase_id = v_hold)
                                then 'not_one_product' else 'not_found' end;
            continue;
        end if;
        if h.resource_id is distinct from p_resources[i] or h.basket_id is not null then
            v_status[i] := 'not_one_product';
            continue;
        end if;
        if h.state = 'held' and h.expires_at > v_now then
            -- the usual case, a live plain line: it may start (what
            -- hf_payment_may_start answers for it, without two function
            -- calls per order under the tier's lock)
            v_status[i] := 'awaiting_payment';
        else
            -- one line: its shape is its row's
            v_status[i] := hf_payment_may_start(h.purchase_id, hf_line_shape(h, v_now), v_now);
        end if;
    end loop;

    perform hf_start_payment(array_agg(o.hold_id), array_agg(p.seconds * interval '1 second'), v_now, 'checkout')
       from unnest(p_orders, p_window_seconds, v_status) as p(order_id, seconds, status)
       join orders o on o.id = p.order_id
      where p.status = 'awaiting_payment'
     having count(*) > 0;

    -- the payment pages; an order whose hold ended before payment could
    -- start is expired, as attach_payment does
    update orders o
       set provider_session_id = p.session_id, provider_url = p.url, provider_expires_at = p.expires,
           state = case when p.status in ('awaiting_payment', 'replayed', 'confirmed') or o.state <> 'pending'
                        then o.state else 'expired' end,
           updated_at = now()
      from unnest(p_orders, p_session_ids, p_urls, p_expires, v_status)
           as p(order_id, session_id, url, expires, status)
     where o.id = p.order_id and p.status not in ('not_found', 'not_one_product');

    -- the baskets of those on their way to pay
    delete from basket_lines b
     using unnest(p_baskets, v_status) as p(basket, status)
     where b.basket_id = p.basket and p.status in ('awaiting_payment', 'replayed', 'confirmed');

    -- and each order's state now
    return query
        select p.order_id, p.status, o.state
          from unnest(p_orders, v_status) with ordinality as p(order_id, status, n)
          left join orders o on o.id = p.order_id
         order by p.n;
end;
$$;


-- The pins' guard once a statement, not once a pin: a batch pins hundreds
-- of seats in one insert under its sections' locks, and three lookups a
-- row were 75 µs each of that lock's time. The same rules and the same
-- words (0180_seating.sql): a pin is made only on a seat on sale, of its
-- hold's own section, for a live hold.
create function hf_seat_pins_guard() returns trigger
language plpgsql as $$
declare
    v record;
begin
    select s.label, s.state, x.product_id is null as elsewhere,
           h.state not in ('held', 'awaiting_payment', 'confirmed') or not n.live as dead
      into v
      from inserted n
      join seats s on s.id = n.seat_id
      join holds h on h.id = n.hold_id
      left join seat_sections x on x.product_id = s.section and x.resource_id = h.resource_id
     where s.state <> 'open' or x.product_id is null
        or h.state not in ('held', 'awaiting_payment', 'confirmed') or not n.live
     order by s.state = 'open', x.product_id is not null
     limit 1;
    if not found then
        return null;
    elsif v.state <> 'open' then
        raise exception 'seat % is not on sale (%)', v.label, v.state
            using errcode = 'check_violation', constraint = 'seat_pin_on_sale';
    elsif v.elsewhere then
        raise exception 'seat % is not of the section its hold holds', v.label
            using errcode = 'check_violation', constraint = 'seat_pin_section';
    end if;
    raise exception 'a pin is made live, on a live hold'
        using errcode = 'check_violation', constraint = 'seat_pin_live_hold';
end;
$$;
drop trigger seat_pins_guard on seat_pins;
drop function hf_seat_pin_guard();
create trigger seat_pins_guard after insert on seat_pins
    referencing new table as inserted
    for each statement execute function hf_seat_pins_guard();

create or replace function hf_attach_payments(p_resource text, p_orders uuid[],
    p_window_seconds integer[], p_session_ids text[], p_urls text[],
    p_expires timestamptz[], p_baskets text[])
returns table (order_id uuid, status text, order_state text)
language sql as $$
    select * from hf_attach_payments(array_fill(p_resource, array[coalesce(cardinality(p_orders), 0)]),
                                     p_orders, p_window_seconds, p_session_ids, p_urls, p_expires,
                                     p_baskets)
$$;
