-- The database's rules of reserved seating, proved at SQL level on a
-- scratch database (bench/seats-db runs it after the migrations and
-- bench/seats-fixture.sql). Each block asserts; the first that fails stops
-- the run (psql -v ON_ERROR_STOP=1) with its message. It prints one line per
-- rule proved. Until the Rust side exists (tests/api/ cannot make a seated
-- event yet), this is where the rules are held; the same cases belong in an
-- api test module once the catalogue loads plans.

\set QUIET on
\pset format unaligned
\pset tuples_only on

select seatbench.hall('hall', 'stalls', 4000);
select seatbench.hall('hall', 'balcony', 2500);

-- stalls: A (nearest the stage) 8 seats, A-8 for a wheelchair;
-- B 12 seats with an aisle after 6; C 10 seats.
select seatbench.section('stalls', 'hall', 'stalls');
select seatbench.row('stalls', 'A', 1, 8);
update seats set access = 'wheelchair' where section = 'stalls' and label = 'A-8';
select seatbench.row('stalls', 'B', 2, 12, '{6}');
select seatbench.row('stalls', 'C', 3, 10);
select seatbench.open('stalls');
-- balcony: one row of 6
select seatbench.section('balcony', 'hall', 'balcony');
select seatbench.row('balcony', 'D', 1, 6);
select seatbench.open('balcony');

-- A section's total is its seats on sale; the drift check is clean.
do $$
begin
    assert (select total from resources where id = 'stalls') = 30, 'stalls has 30 seats on sale';
    assert not exists (select 1 from hf_check() where drift), 'no drift after the plan is made';
end $$;
select 'ok  a section''s total is its seats on sale (stalls 30, balcony 6), hf_check clean';

-- Best available, together: N adjacent seats in one run, nearest the stage,
-- no orphan. Row A has 7 standard seats (A-8 is a wheelchair place, never
-- given unasked): 2 seats leave no orphan at A-3,A-4 (5 and 3 left) and
-- A-4,A-5 (3 and 2 left, nearer the middle of the house).
do $$
declare
    r record;
begin
    select * into r from seatbench.checkout('stalls', 2, null);
    assert r.status = 'started', format('best 2 started, got %s', r.status);
    assert r.seats = '{A-4,A-5}', format('best 2 are A-4, A-5, got %s', r.seats);
    assert seatbench.together(r.hold_id), 'the 2 seats are together';
    assert seatbench.orphans('stalls') = 0, 'no orphan left';
    assert not exists (select 1 from hf_check() where drift), 'no drift after a grant';
end $$;
select 'ok  best 2 together: A-4, A-5 (row nearest the stage, middle, no orphan)';

-- No orphan where another choice exists: row A now has A-1..A-3 (3 free)
-- and A-6, A-7 (2 free). Best 2: A-6,A-7 fills a stretch exactly; A-1,A-2
-- and A-2,A-3 would leave a lone seat. Then best 3 takes A-1..A-3 exactly.
do $$
declare
    r record;
begin
    select * into r from seatbench.checkout('stalls', 2, null);
    assert r.seats = '{A-6,A-7}', format('best 2 fill A-6,A-7, got %s', r.seats);
    select * into r from seatbench.checkout('stalls', 3, null);
    assert r.seats = '{A-1,A-2,A-3}', format('best 3 fill A-1..A-3, got %s', r.seats);
    assert seatbench.orphans('stalls') = 0, 'no orphan left';
end $$;
select 'ok  no orphan where another choice exists: A-6,A-7 then A-1..A-3 fill their stretches';

-- Orphans come before the row: with row A full, best 5 in row B (runs of
-- 6 either side of the aisle) would leave one seat alone in either run; row
-- C (10) seats 5 without: 5 and 0 left... C-1..C-5 or C-6..C-10 leave none,
-- so row C wins over the nearer row B.
do $$
declare
    r record;
begin
    select * into r from seatbench.checkout('stalls', 5, null);
    assert r.status = 'started', format('best 5 started, got %s', r.status);
    assert r.seats[1] like 'C-%', format('best 5 go to row C (no orphan), got %s', r.seats);
    assert seatbench.together(r.hold_id), 'the 5 seats are together';
    assert seatbench.orphans('stalls') = 0, 'no orphan left';
end $$;
select 'ok  fewest orphans before the nearest row: best 5 go to row C, not B';

-- An aisle splits a row: best 7 does not fit a run of B (6 and 6) nor what
-- is left of C (5): not together, the best split offered, nothing held.
do $$
declare
    r record;
    v_held integer := (select held from resources where id = 'stalls');
begin
    select * into r from seatbench.checkout('stalls', 7, null);
    assert r.status = 'not_together', format('best 7 together: not_together, got %s', r.status);
    assert jsonb_array_length(r.offers -> 0) = 7, format('a split of 7 offered, got %s', r.offers);
    assert r.split_allowed, 'the shop lets a split be sold (the default)';
    assert (select held from resources where id = 'stalls') = v_held, 'nothing held';
    -- asked not necessarily together, the split is sold
    select * into r from seatbench.checkout('stalls', 7, null, false);
    assert r.status = 'started', format('best 7 apart: started, got %s', r.status);
    assert cardinality(r.seats) = 7, 'seven seats';
    assert not seatbench.together(r.hold_id), 'apart';
    perform hf_release(r.hold_id);
    -- a shop that sells no split only offers it
    update seating_settings set splits = false;
    select * into r from seatbench.checkout('stalls', 7, null, false);
    assert r.status = 'not_together' and not r.split_allowed,
        format('no split sold when the shop says so, got %s', r.status);
    update seating_settings set splits = true;
end $$;
select 'ok  no run has 7: not_together with the best split offered; sold apart only when asked and allowed';

-- Fewer free seats than asked: sold out, nothing held.
do $$
declare
    r record;
begin
    select * into r from seatbench.checkout('balcony', 7, null);
    assert r.status = 'sold_out', format('7 of 6: sold_out, got %s', r.status);
end $$;
select 'ok  more than the free seats: sold_out';

-- Named seats: all or none. Taken seats are named, with the nearest seats
-- together offered; unknown seats are named.
do $$
declare
    r record;
    v_hold uuid;
begin
    select * into r from seatbench.checkout('balcony', 2, 'D-3,D-4');
    assert r.status = 'started' and r.seats = '{D-3,D-4}', format('D-3,D-4 started, got %s', r.status);
    v_hold := r.hold_id;
    select * into r from seatbench.checkout('balcony', 2, 'D-4,D-5');
    assert r.status = 'seats_taken', format('D-4 taken: seats_taken, got %s', r.status);
    assert r.taken = '{D-4}', format('D-4 named as taken, got %s', r.taken);
    assert r.offers @> '[["D-5","D-6"]]', format('D-5,D-6 offered, got %s', r.offers);
    assert (select count(*) from seat_pins p join seats s on s.id = p.seat_id
             where s.label = 'D-5' and s.section = 'balcony' and p.live) = 0, 'D-5 not held (all or none)';
    select * into r from seatbench.checkout('balcony', 1, 'D-9');
    assert r.status = 'unknown_seats' and r.taken = '{D-9}', format('D-9 unknown, got %s', r.status);
    perform hf_release(v_hold);
end $$;
select 'ok  named seats all or none: D-4 taken is named with D-5,D-6 offered; D-9 unknown';

-- A seat is never pinned twice: a second live pin, written directly past
-- every function, is refused by the unique index seat_pins_live.
do $$
declare
    a uuid;
    b uuid;
    v_seat bigint := (select id from seats where section = 'balcony' and label = 'D-1');
begin
    a := (hf_hold('balcony', 1, 'direct-a')).hold_id;
    b := (hf_hold('balcony', 1, 'direct-b')).hold_id;
    insert into seat_pins (seat_id, hold_id) values (v_seat, a);
    begin
        insert into seat_pins (seat_id, hold_id) values (v_seat, b);
        raise exception 'a second live pin of D-1 was accepted';
    exception when unique_violation then
        assert sqlerrm like '%seat_pins_live%', sqlerrm;
    end;
    -- the hold that had it released, the seat may be pinned again
    perform hf_release(a);
    insert into seat_pins (seat_id, hold_id) values (v_seat, b);
    perform hf_release(b);
end $$;
select 'ok  a seat is never pinned twice: a direct second live pin is refused (seat_pins_live)';

-- A pin only on a seat on sale, of its own section, for a live hold.
do $$
declare
    a uuid := (hf_hold('balcony', 1, 'direct-c')).hold_id;
    v_blocked bigint;
begin
    update seats set state = 'blocked', note = 'camera' where section = 'balcony' and label = 'D-6'
    returning id into v_blocked;
    begin
        insert into seat_pins (seat_id, hold_id) values (v_blocked, a);
        raise exception 'a pin on a blocked seat was accepted';
    exception when check_violation then
        assert sqlerrm like '%not on sale%', sqlerrm;
    end;
    update seats set state = 'open', note = '' where id = v_blocked;
    begin
        insert into seat_pins (seat_id, hold_id)
        values ((select id from seats where section = 'stalls' and label = 'B-1'), a);
        raise exception 'a pin on another section''s seat was accepted';
    exception when check_violation then
        assert sqlerrm like '%not of the section%', sqlerrm;
    end;
    perform hf_release(a);
    begin
        insert into seat_pins (seat_id, hold_id)
        values ((select id from seats where section = 'balcony' and label = 'D-2'), a);
        raise exception 'a pin for a released hold was accepted';
    exception when check_violation then
        assert sqlerrm like '%live hold%', sqlerrm;
    end;
end $$;
select 'ok  a pin only on a seat on sale, of its hold''s section, for a live hold (three refusals)';

-- A seat with a live pin cannot be blocked or held back, directly or
-- through hf_seat_set_state (which names it and changes nothing).
do $$
declare
    r record;
    s record;
begin
    select * into r from seatbench.checkout('balcony', 1, 'D-2');
    begin
        update seats set state = 'blocked' where section = 'balcony' and label = 'D-2';
        raise exception 'a held seat was blocked';
    exception when check_violation then
        assert sqlerrm like '%keeps its place%', sqlerrm;
    end;
    select * into s from hf_seat_set_state('balcony', '{D-1,D-2}', 'held_back', 'press');
    assert s.status = 'refused' and s.refused = '{D-2}', format('D-2 refused, got %s %s', s.status, s.refused);
    assert (select state from seats where section = 'balcony' and label = 'D-1') = 'open',
        'D-1 unchanged with the refusal';
    -- a free seat held back: the section's total follows
    select * into s from hf_seat_set_state('balcony', '{D-1}', 'held_back', 'press');
    assert s.status = 'changed' and s.total = 5, format('D-1 held back, total 5, got %s %s', s.status, s.total);
    r.seats := (select array_agg(label) from seats where section = 'balcony' and state = 'open');
    assert not ('D-1' = any (r.seats)), 'D-1 off sale';
    select * into s from hf_seat_set_state('balcony', '{D-1}', 'open', '');
    assert s.total = 6, 'D-1 back on sale';
    perform hf_release(r.hold_id);
    assert not exists (select 1 from hf_check() where drift), 'no drift';
end $$;
select 'ok  a seat with a live pin cannot be blocked or held back (trigger, and hf_seat_set_state names it)';

-- Pins end with their hold: released, expired (the sweeper's path), and a
-- confirmed seat stays pinned until a refund gives it back.
do $$
declare
    r record;
    v_pins integer;
begin
    -- released
    select * into r from seatbench.checkout('balcony', 2, null);
    perform hf_release(r.hold_id);
    assert not exists (select 1 from seat_pins where hold_id = r.hold_id and live), 'released: pins ended';
    assert (select end_reason from seat_pins where hold_id = r.hold_id limit 1) = 'released', 'reason released';
    -- expired: the hold's time is up and the sweeper runs
    select * into r from seatbench.checkout('balcony', 2, null);
    perform seatbench.due(r.hold_id);
    perform hf_sweep_resource('balcony');
    assert (select state from holds where id = r.hold_id) = 'expired', 'the hold expired';
    assert not exists (select 1 from seat_pins where hold_id = r.hold_id and live), 'expired: pins ended';
    assert not exists (select 1 from hf_check() where drift), 'no drift after expiry';
    -- an expired hold's seats are free to the next shopper at once, even
    -- before a sweep: the choice ends due holds first
    select * into r from seatbench.checkout('balcony', 6, null);
    perform seatbench.due(r.hold_id);
    select * into r from seatbench.checkout('balcony', 6, null);
    assert r.status = 'started', format('due seats are free again, got %s', r.status);
    -- confirmed: the pins live on; a refund of one code gives its seat back
    perform hf_confirm(r.hold_id, 'pay_' || r.hold_id);
    assert (select count(*) from seat_pins where hold_id = r.hold_id and live) = 6, 'sold: 6 pins live';
    insert into order_items (code, order_id, product_id)
    select 'C' || g || '-' || upper(substr(replace(r.order_id::text, '-', ''), 1, 12)), r.order_id,
           'balcony'
      from generate_series(1, 6) g;
    assert (select count(distinct seat_id) from order_items where order_id = r.order_id) = 6,
        'each item carries its own seat';
    v_pins := hf_seat_return((select hold_id from orders where id = r.order_id),
                             array(select id from order_items where order_id = r.order_id
                                    order by code limit 1), true);
    assert v_pins = 1, format('one pin ended by the refund, got %s', v_pins);
    perform hf_return(r.hold_id, 1, true, 'staff', 'refund');
    assert (select count(*) from seat_pins where hold_id = r.hold_id and live) = 5, 'sold: 5 pins live';
    assert not exists (select 1 from hf_check() where drift), 'no drift after the refund';
    assert (select total - held - sold from resources where id = 'balcony') = 1, 'one seat free again';
end $$;
select 'ok  pins end with their hold: release, expiry (swept, or ended by the next choice); a refund gives one seat back';

-- A basket of several products is one checkout (hf_start_checkouts):
-- every claim held at once, under every resource's lock, each seat line's
-- seats chosen and pinned beside its units and named on the order's line;
-- a seat taken refuses the whole basket, and nothing of it is held.
select seatbench.ga('ga-basket', 'hall', 10);
do $$
declare
    v_basket jsonb := seatbench.one('stalls', 2, 'B-1,B-2', p_key => 'basket-1');
    o uuid;
    r record;
begin
    v_basket := jsonb_set(v_basket, '{lines}', (v_basket->'lines')
                    || (seatbench.one('ga-basket', 1, null, p_seated => false)->'lines'));
    select * into r from hf_start_checkouts(jsonb_build_array(v_basket));
    assert r.status = 'started', format('the basket started, got %s %s', r.status, r.detail);
    o := r.order_id;
    assert (select count(*) from holds where basket_id = r.hold_id) = 2, 'a basket of two holds';
    assert (select name from order_lines where order_id = o and product_id = 'stalls') = 'Stalls — B-1, B-2',
        'the order line names its seats';
    assert hf_webhook_order(o) -> 'lines' @> '[{"product_id": "stalls", "seats": ["B-1", "B-2"]}]',
        format('the webhook''s order names the seats, got %s', hf_webhook_order(o) -> 'lines');
    assert exists (select 1 from jsonb_array_elements(hf_webhook_order(o) -> 'lines') l
                    where l->>'product_id' = 'ga-basket' and not l ? 'seats'), 'a GA line has no seats';
    -- the same form again: its order, nothing more pinned or named
    select * into r from hf_start_checkouts(jsonb_build_array(v_basket));
    assert r.status = 'already_started' and r.order_id = o, format('again: its order, got %s', r.status);
    assert (select count(*) from seat_pins p join holds h on h.id = p.hold_id
             where h.purchase_id = (select hold_id from orders where id = o) and p.live) = 2,
        'still two pins';
    assert (select name from order_lines where order_id = o and product_id = 'stalls') = 'Stalls — B-1, B-2',
        'named once';
    assert not exists (select 1 from hf_check() where drift), 'no drift after a basket';
end $$;
do $$
declare
    v_basket jsonb := seatbench.one('stalls', 2, 'B-2,B-3', p_key => 'basket-2');
    r record;
begin
    v_basket := jsonb_set(v_basket, '{lines}', (v_basket->'lines')
                    || (seatbench.one('ga-basket', 1, null, p_seated => false)->'lines'));
    select * into r from hf_start_checkouts(jsonb_build_array(v_basket));
    assert r.status = 'seats_taken' and r.detail->'seats' = '["B-2"]',
        format('B-2 taken, got %s %s', r.status, r.detail);
    assert not exists (select 1 from orders where checkout_key = 'basket-2'), 'nothing of the basket stays';
    assert (select held from resources where id = 'ga-basket') = 1, 'the GA unit was not held';
    assert not exists (select 1 from hf_check() where drift), 'no drift after the refusal';
end $$;
select 'ok  a basket of seats and GA is one checkout, held at once, its seats named (line, webhook); a taken seat refuses it all';

-- The waiting list is offered seats together: a section sold out with one
-- entry waiting for 2; a hold of 2 released hands its seats to the offer,
-- pinned to the offer's hold.
select seatbench.section('box', 'hall', 'stalls');
select seatbench.row('box', 'X', 1, 4);
select seatbench.open('box');
do $$
declare
    a record;
    b record;
    e uuid;
    v_offer uuid;
begin
    select * into a from seatbench.checkout('box', 2, null);
    select * into b from seatbench.checkout('box', 2, null);
    assert a.status = 'started' and b.status = 'started', 'box sold out';
    insert into waitlist_entries (product_id, token, name, email, email_key, qty, provider, state,
                                  line_no, confirmed_at)
    values ('box', md5('w1') || md5('w1'), 'Waiting', 'w@example.com', 'w@example.com', 2, 'stripe',
            'waiting', 1, now())
    returning id into e;
    perform hf_release(a.hold_id);
    assert (select state from waitlist_entries where id = e) = 'offered', 'the entry is offered';
    select o.hold_id into v_offer from orders o join waitlist_entries w on w.order_id = o.id where w.id = e;
    assert (select count(*) from seat_pins where hold_id = v_offer and live) = 2, 'the offer holds 2 seats';
    assert seatbench.together(v_offer), 'together';
    assert (select l.name from order_lines l join waitlist_entries w on w.order_id = l.order_id
             where w.id = e) like 'Box — X-%', 'the offer''s line names its seats';
    assert not exists (select 1 from hf_check() where drift), 'no drift after the handover';
    perform hf_release(v_offer);
    perform hf_release(b.hold_id);
end $$;
select 'ok  the waiting list is offered seats together, pinned to the offer''s hold';

-- Late money claims the same seats again only when they are all free.
do $$
declare
    a record;
    c record;
    v_new uuid;
begin
    select * into a from seatbench.checkout('box', 2, 'X-1,X-2');
    perform seatbench.due(a.hold_id);
    perform hf_sweep_resource('box');
    assert hf_claimable(a.hold_id), 'the hint says it can be claimed again';
    select * into c from hf_claim_again(a.hold_id, 'late-1');
    assert c.status = 'claimed', format('claimed again, got %s', c.status);
    v_new := c.purchase_id;
    assert (select array_agg(s.label order by s.label) from seat_pins p
              join holds h on h.id = p.hold_id join seats s on s.id = p.seat_id
             where h.purchase_id = v_new and p.live) = '{X-1,X-2}', 'the same seats pinned to the sale';
    -- another late payment whose seats went to someone else is refused
    select * into a from seatbench.checkout('box', 2, 'X-3,X-4');
    perform seatbench.due(a.hold_id);
    perform hf_sweep_resource('box');
    select * into c from seatbench.checkout('box', 1, 'X-4');
    assert c.status = 'started', 'X-4 to another shopper';
    assert not hf_claimable(a.hold_id), 'the hint says it cannot be claimed again';
    select * into c from hf_claim_again(a.hold_id, 'late-2');
    assert c.status = 'sold_out', format('its seat is taken: sold_out, got %s', c.status);
    assert not exists (select 1 from hf_check() where drift), 'no drift after late money';
end $$;
select 'ok  late money claims the same seats again, or sold_out when one of them is taken (hf_claimable agrees)';

-- A plan in the compact form (hf_seat_plan): rows with a first and last
-- seat, aisles and accessible places. An edit adds, moves and removes
-- seats; a seat held or sold must stay (an edit dropping it is refused and
-- changes nothing), a seat once sold is blocked rather than removed, and
-- the section's total follows its seats on sale. Bad shapes are refused.
select seatbench.section('circle', 'hall', 'balcony');
do $$
declare
    p record;
    r record;
begin
    select * into p from hf_seat_plan('circle',
        '[{"row": "E", "rank": 1, "seats": [1, 24], "aisles_after": [12], "wheelchair": [1], "companion": [2]},
          {"row": "F", "rank": 2, "seats": [1, 10]}]');
    assert p.status = 'changed' and p.added = 34 and p.total = 34, format('34 seats made, got %s', p);
    assert (select count(distinct run) from seats where section = 'circle' and row_label = 'E') = 2,
        'the aisle after E-12 makes two runs';
    assert (select access from seats where section = 'circle' and label = 'E-1') = 'wheelchair', 'E-1 wheelchair';
    -- the best 12 together: a run of E (E-13..E-24: E-1, E-2 are access places)
    select * into r from seatbench.checkout('circle', 12, null);
    assert r.seats = (select array_agg('E-' || n order by n) from generate_series(13, 24) n),
        format('E-13..E-24, got %s', r.seats);
    -- dropping row E (held) is refused, naming its seats, and changes nothing
    select * into p from hf_seat_plan('circle', '[{"row": "F", "rank": 1, "seats": [1, 12]}]');
    assert p.status = 'refused' and cardinality(p.refused) = 12, format('refused, got %s', p);
    assert (select count(*) from seats where section = 'circle') = 34, 'nothing changed';
    -- sold, then E's seats 13..24 stay; F grows to 12, E shrinks to 13..24
    perform hf_confirm(r.hold_id, 'pay-circle');
    select * into p from hf_seat_plan('circle',
        '[{"row": "E", "rank": 1, "seats": [13, 24]}, {"row": "F", "rank": 2, "seats": [1, 12]}]');
    assert p.status = 'changed' and p.added = 2 and p.removed = 12 and p.total = 24,
        format('2 added, 12 removed, 24 on sale, got %s', p);
    assert (select count(*) from seat_pins x join seats s on s.id = x.seat_id
             where s.section = 'circle' and x.live) = 12, 'the 12 sold seats keep their pins';
    assert not exists (select 1 from hf_check() where drift), 'no drift after the edits';
    -- a refund gives E-13 back; dropping it from the plan then blocks it
    -- (a code names it), and bringing it back puts it on sale again
    insert into order_items (code, order_id, product_id)
    select 'CIRCLE-' || g, (select id from orders where hold_id = r.hold_id), 'circle'
      from generate_series(1, 12) g;
    perform hf_seat_return(r.hold_id, array(select c.id from order_items c join seats s on s.id = c.seat_id
                                             where s.label = 'E-13' and s.section = 'circle'), true);
    perform hf_return(r.hold_id, 1, true, 'staff', 'refund');
    select * into p from hf_seat_plan('circle',
        '[{"row": "E", "rank": 1, "seats": [14, 24]}, {"row": "F", "rank": 2, "seats": [1, 12]}]');
    assert p.status = 'changed' and p.total = 23, format('E-13 off the plan, got %s', p);
    assert (select state || ' ' || note from seats where section = 'circle' and label = 'E-13')
           = 'blocked off the plan', 'E-13 blocked, not removed';
    select * into p from hf_seat_plan('circle',
        '[{"row": "E", "rank": 1, "seats": [13, 24]}, {"row": "F", "rank": 2, "seats": [1, 12]}]');
    assert p.total = 24 and (select state from seats where section = 'circle' and label = 'E-13') = 'open',
        'E-13 back on sale';
    assert not exists (select 1 from hf_check() where drift), 'no drift';
end $$;
do $$
declare
    v_bad text;
    v_seats integer := (select count(*) from seats where section = 'circle');
begin
    foreach v_bad in array array[
        '[]', '{}', '[{"row": "E", "rank": 1}]', '[{"row": "", "rank": 1, "seats": [1, 2]}]',
        '[{"row": "E", "rank": 0, "seats": [1, 2]}]', '[{"row": "E", "rank": "1", "seats": [1, 2]}]',
        '[{"row": "E", "rank": 1, "seats": [3, 2]}]', '[{"row": "E", "rank": 1, "seats": [1, 2000]}]',
        '[{"row": "E", "rank": 1, "seats": [1, "x"]}]', '[{"row": "E", "rank": 1, "seats": [1, 2], "aisles_after": [-1]}]',
        '[{"row": "E", "rank": 1, "seats": [1, 2]}, {"row": "E", "rank": 2, "seats": [1, 2]}]',
        '[{"row": "E", "rank": 1, "seats": [1, 2]}, {"row": "F", "rank": 1, "seats": [1, 2]}]']
    loop
        begin
            perform hf_seat_plan('circle', v_bad::jsonb);
            raise exception 'a bad plan was taken: %', v_bad;
        exception when sqlstate '22023' then
            null;
        end;
    end loop;
    assert (select count(*) from seats where section = 'circle') = v_seats, 'bad plans change nothing';
end $$;
select 'ok  a plan in the compact form: rows, aisles, access places; an edit keeps held and sold seats (refused when it drops one), blocks a seat once sold, and bad shapes are refused';

-- A combined start (hf_start_checkouts with several checkouts, as the
-- combiner sends them): seats chosen for one are not chosen for the next;
-- and a checkout refused (over its e-mail's limit) takes no seat, so the
-- next one naming them gets them.
select seatbench.section('combo', 'hall', 'stalls');
select seatbench.plan('combo', 2);
do $$
declare
    r record;
    v_status text[];
    v_seats text[];
    v_taken text[];
begin
    for r in
        select c.status, c.hold_id, c.detail
          from hf_start_checkouts(jsonb_build_array(
                   -- k1's e-mail may hold 1 only: it is refused
                   seatbench.one('combo', 2, 'R1-5,R1-6', p_key => 'k1', p_email_cap => 1),
                   seatbench.one('combo', 2, 'R1-6,R1-7', p_key => 'k2', p_email_cap => 10),
                   seatbench.one('combo', 2, null, p_key => 'k3'),
                   seatbench.one('combo', 2, 'R1-5,R1-6', p_key => 'k4'))) c
    loop
        v_status := v_status || r.status;
        v_taken := v_taken || coalesce((select string_agg(t, ',')
                                          from jsonb_array_elements_text(r.detail->'seats') t), '');
        v_seats := v_seats || coalesce(array_to_string(seatbench.pinned(r.hold_id), ','), '');
    end loop;
    -- k2 comes before k4: it gets R1-6, and k4 is told R1-6 is taken
    assert v_status = '{over_limit,started,started,seats_taken}',
        format('k1 over its limit, k2 and k3 started, k4 seats_taken, got %s', v_status);
    assert v_seats[2] = 'R1-6,R1-7', format('k2 got R1-6,R1-7, k1 having taken none, got %s', v_seats[2]);
    assert v_taken[4] = 'R1-6', format('k4 told R1-6 is taken, got %s', v_taken[4]);
    assert not exists (select 1 from hf_check('combo') where drift), 'no drift';
    assert (select count(*) from seat_pins p join seats s on s.id = p.seat_id
             where s.section = 'combo' and p.live) = 4, 'two grants, four pins';
    assert v_seats[3] not like '%R1-5%' and v_seats[3] not like '%R1-6%' and v_seats[3] not like '%R1-7%',
        format('k3''s best 2 are none of the named, got %s', v_seats[3]);
end $$;
select 'ok  a combined start: seats chosen for one checkout are not chosen for the next; a checkout refused takes none, so the next naming them gets them';

do $$
begin
    assert not exists (select 1 from hf_check() where drift), 'no drift at the end';
    assert not exists (select seat_id from seat_pins where live group by seat_id having count(*) > 1),
        'no seat pinned twice';
end $$;
select 'ok  hf_check clean and no seat pinned twice at the end';
