-- The seats' combiner's call (docs/design.md, "Reserved seating"), as
-- 0180's, but a form sent twice inside one batch (a double submit that
-- reached the combiner at the same moment) is answered as its first: 0180
-- sent the second to hf_start_checkouts with no seats chosen, and when the
-- first had been refused for want of seats the second was held units with
-- no seat pinned (its section's held above its pins). Now it gets the same
-- order (already started) or the same refusal, and chooses nothing. And the
-- requests refused for want of seats are chosen again as long as seats
-- come back (0180 tried three rounds: a batch with many requests over a
-- fair-sale limit kept taking seats round after round, and buyers beside
-- them were told "sold out" with seats left).

create or replace function hf_start_seat_checkouts(p_resource text, p_keys text[], p_accounts text[],
                                        p_qtys integer[], p_products text[],
                                        p_product_names text[], p_unit_prices bigint[],
                                        p_currencies text[], p_tokens text[], p_names text[],
                                        p_emails text[], p_providers text[], p_email_keys text[],
                                        p_addresses text[], p_email_caps integer[],
                                        p_address_caps integer[], p_seats text[],
                                        p_together boolean[])
returns table (status text, order_id uuid, hold_id uuid, available integer,
               created_at timestamptz, seats text[], taken text[], offers jsonb,
               split_allowed boolean)
language plpgsql as $$
declare
    v_n integer := coalesce(cardinality(p_keys), 0);
    v_status text[] := array_fill(null::text, array[greatest(v_n, 1)]);
    v_order uuid[] := array_fill(null::uuid, array[greatest(v_n, 1)]);
    v_hold uuid[] := array_fill(null::uuid, array[greatest(v_n, 1)]);
    v_avail integer[] := array_fill(null::integer, array[greatest(v_n, 1)]);
    v_at timestamptz[] := array_fill(null::timestamptz, array[greatest(v_n, 1)]);
    v_pick jsonb[] := array_fill(null::jsonb, array[greatest(v_n, 1)]);
    v_labels jsonb[] := array_fill(null::jsonb, array[greatest(v_n, 1)]);
    v_taken jsonb[] := array_fill(null::jsonb, array[greatest(v_n, 1)]);
    v_offers jsonb[] := array_fill(null::jsonb, array[greatest(v_n, 1)]);
    v_split boolean[] := array_fill(null::boolean, array[greatest(v_n, 1)]);
    -- this round: who is chosen for, and who goes on to the holds
    v_decide integer[];
    v_go integer[];
    v_chosen bigint[];
    v_gave_back boolean;
    v_named text[];
    -- a form repeated in the batch: answered as its first, at the end
    v_again integer[] := '{}';
    v_first integer;
    c record;
    x record;
begin
    if v_n not between 1 and 1000 then
        perform hf_bad_input(format('a batch starts 1 to 1000 checkouts, got %s', v_n));
    end if;
    if coalesce(cardinality(p_seats), -1) <> v_n or coalesce(cardinality(p_together), -1) <> v_n then
        perform hf_bad_input('every checkout needs its seats or its together: arrays of one length');
    end if;
    if (hf_seat_section(p_resource)).product_id is null then
        perform hf_bad_input(format('%s is not a seated section', p_resource));
    end if;
    -- lock: every e-mail and address of the batch, in one order, then the
    -- section (hf_start_checkouts takes both again, as they are held)
    perform hf_limit_lock(k.k)
       from (select distinct k from unnest(p_email_keys || p_addresses) k
              where k is not null order by k) k;
    perform 1 from resources where id = p_resource for no key update;
    perform hf_seat_expire_due(p_resource);

    -- the checkouts that choose seats: new forms (a form seen before, here
    -- or earlier, goes on to be answered as the order it has)
    v_decide := '{}';
    v_go := '{}';
    for i in 1 .. v_n loop
        if p_keys[i] = any (p_keys[1 : i - 1]) then
            v_again := v_again || i;
        elsif exists (select 1 from orders o where o.checkout_key = p_keys[i]) then
            v_go := v_go || i;
        else
            v_decide := v_decide || i;
        end if;
    end loop;

    -- until no seats come back: a round that gives seats back has refused
    -- at least one request for good (a limit), so rounds are at most the
    -- requests (0180 stopped after three, and a batch with more buyers
    -- over their limit than that left others told "sold out" beside seats
    -- nobody got)
    loop
        -- seats granted in an earlier round are pinned now
        v_chosen := '{}';
        for k in 1 .. coalesce(cardinality(v_decide), 0) loop
            declare
                i integer := v_decide[k];
            begin
                v_named := case when p_seats[i] is null then null
                                else string_to_array(p_seats[i], ',') end;
                select * into c
                  from hf_seat_choose(p_resource, v_named, p_qtys[i],
                                      coalesce(p_together[i], true), v_chosen);
                if c.status = 'chosen' then
                    v_pick[i] := to_jsonb(c.seat_ids);
                    v_labels[i] := to_jsonb(c.labels);
                    v_chosen := v_chosen || c.seat_ids;
                    v_status[i] := null;
                    v_go := v_go || i;
                else
                    v_status[i] := case c.status when 'taken' then 'seats_taken'
                                                 when 'unknown' then 'unknown_seats'
                                                 else c.status end;
                    v_taken[i] := to_jsonb(c.taken);
                    v_offers[i] := c.offers;
                    v_split[i] := c.split_allowed;
                    v_avail[i] := c.free;
                end if;
            end;
        end loop;
        exit when coalesce(cardinality(v_go), 0) = 0;

        -- the chosen (and the forms seen before) to the holds, in arrival order
        select array_agg(g order by g) into v_go from unnest(v_go) g;
        v_gave_back := false;
        for x in
            select r.status, r.order_id, r.hold_id, r.available, r.created_at, u.n
              from hf_start_checkouts(
                       p_resource,
                       array(select p_keys[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_accounts[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select case when v_pick[g] is null then p_qtys[g]
                                         else jsonb_array_length(v_pick[g]) end
                               from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_products[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_product_names[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_unit_prices[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_currencies[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_tokens[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_names[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_emails[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_providers[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_email_keys[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_addresses[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_email_caps[g] from unnest(v_go) with ordinality u(g, o) order by o),
                       array(select p_address_caps[g] from unnest(v_go) with ordinality u(g, o) order by o))
                   with ordinality as r(status, order_id, hold_id, available, created_at, n)
              join lateral (select v_go[r.n::int] as n) u on true
        loop
            v_status[x.n] := x.status;
            v_order[x.n] := x.order_id;
            v_hold[x.n] := x.hold_id;
            v_avail[x.n] := x.available;
            v_at[x.n] := x.created_at;
            if x.status = 'started' and v_pick[x.n] is not null then
                perform hf_seat_pin(x.hold_id,
                                    array(select jsonb_array_elements_text(v_pick[x.n])::bigint));
                perform hf_seat_name_line(x.order_id, p_products[x.n],
                                          array(select jsonb_array_elements_text(v_pick[x.n])::bigint));
            elsif v_pick[x.n] is not null then
                -- refused after all: its seats go back
                v_pick[x.n] := null;
                v_labels[x.n] := null;
                v_gave_back := true;
            end if;
        end loop;
        -- choose again for those refused for want of seats, only if seats
        -- came back
        v_decide := array(select i from generate_series(1, v_n) i
                           where v_status[i] in ('seats_taken', 'not_together', 'sold_out'));
        v_go := '{}';
        exit when not v_gave_back or cardinality(v_decide) = 0;
    end loop;

    -- a form sent twice in one batch is its first's: the same order, or
    -- the same refusal (never units without seats)
    foreach v_first in array v_again loop
        declare
            i integer := v_first;
            f integer := array_position(p_keys, p_keys[v_first]);
        begin
            v_status[i] := case when v_status[f] = 'started' then 'already_started'
                                else v_status[f] end;
            v_order[i] := v_order[f];
            v_hold[i] := v_hold[f];
            v_avail[i] := v_avail[f];
            v_at[i] := v_at[f];
            v_taken[i] := v_taken[f];
            v_offers[i] := v_offers[f];
            v_split[i] := v_split[f];
        end;
    end loop;

    return query
        select v_status[i], v_order[i], v_hold[i], v_avail[i], coalesce(v_at[i], now()),
               case when v_status[i] = 'started' and v_labels[i] is not null
                    then array(select jsonb_array_elements_text(v_labels[i])) end,
               case when v_taken[i] is not null and jsonb_typeof(v_taken[i]) = 'array'
                    then array(select jsonb_array_elements_text(v_taken[i])) end,
               v_offers[i], v_split[i]
          from generate_series(1, v_n) i
         order by i;
end;
$$;
