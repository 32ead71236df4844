-- Seats chosen ahead of the locks (issue 45). A seated event's batch of
-- checkouts chose its best seats from a read of its sections' free seats
-- under its locks (hf_seats_free, 0230), in a transaction of four round
-- trips that held the event's sections all along. Now the application
-- chooses them from its memory of the seats first, outside any lock, and
-- starts the batch here in one statement: this takes the locks
-- hf_start_checkouts takes, in its order, and checks each line's chosen
-- seats under them. A line with a seat that is not open, is kept for
-- access, is of another section, does not exist or is pinned by a live
-- hold loses its choice (`chosen`, and its labels in `seats`), and
-- hf_start_checkouts chooses its seats as for any best-available line
-- (hf_seat_choose, around the seats the batch pinned before it). Memory
-- never decides that no stretch holds a line (its seats of holds past
-- their time are swept only here): such a line comes without a choice.
-- Each started checkout with seats says which it was given (`pinned`:
-- seat ids by section resource, in its detail), so the application's
-- next choice leaves them before its memory hears of them. Everything
-- else is hf_start_checkouts', unchanged.
--
-- It runs with PostgreSQL's JIT off: the planner guesses 100 rows for each
-- jsonb_array_elements, the guessed cost passes jit_above_cost, and
-- compiling a first version of the check took 20-40 ms a call for a few
-- index lookups (bench/seats, pg_stat_statements' jit_* columns).
create function hf_start_checkouts_chosen(p_checkouts jsonb)
returns table (status text, order_id uuid, hold_id uuid, number text,
               created_at timestamptz, detail jsonb)
language plpgsql set jit = off as $$
declare
    v_checkouts jsonb := p_checkouts;
    v_c integer[];
    v_l integer[];
    v_product text[];
    v_seat bigint[];
    v_bad_c integer[];
    v_bad_l integer[];
    v_seated integer[] := '{}';
    v_row record;
    v_i integer := 0;
    v_pinned jsonb;
begin
    -- hf_start_checkouts says what is wrong with a call that is no list,
    -- or whose checkouts carry no lists
    if jsonb_typeof(p_checkouts) = 'array'
       and not exists (select 1 from jsonb_array_elements(p_checkouts) c
                        where jsonb_typeof(c->'lines') is distinct from 'array'
                           or jsonb_typeof(coalesce(c->'uses', '[]')) <> 'array') then
        if exists (select 1
                     from jsonb_array_elements(p_checkouts) c,
                          jsonb_array_elements(c->'lines') l,
                          jsonb_array_elements(case jsonb_typeof(l->'chosen')
                                               when 'array' then l->'chosen' else '[]' end) i(v)
                    where i.v::text !~ '^[1-9][0-9]{0,17}$') then
            perform hf_bad_input('chosen seats are seat ids');
        end if;
        -- its locks, in its order: the e-mails' and addresses' keys, then
        -- every resource of the batch, ascending
        perform hf_limit_lock(k.k)
           from (select distinct k
                   from jsonb_array_elements(p_checkouts) c,
                        unnest(array[c->>'email_key', c->>'address']) k
                  where k is not null order by k) k;
        perform 1 from resources x
         where x.id in (select l->>'resource'
                          from jsonb_array_elements(p_checkouts) c,
                               jsonb_array_elements(c->'lines') l
                        union
                        select u->>'resource'
                          from jsonb_array_elements(p_checkouts) c,
                               jsonb_array_elements(coalesce(c->'uses', '[]')) u)
         order by x.id for no key update;
        -- every seat chosen: its checkout, its line, its section
        select array_agg(c.n - 1), array_agg(l.n - 1), array_agg(l.v->>'product'),
               array_agg(i.id::bigint)
          into v_c, v_l, v_product, v_seat
          from jsonb_array_elements(p_checkouts) with ordinality c(v, n),
               jsonb_array_elements(c.v->'lines') with ordinality l(v, n),
               jsonb_array_elements_text(case jsonb_typeof(l.v->'chosen')
                                         when 'array' then l.v->'chosen' else '[]' end) as i(id);
        -- each looked up by its keys (offset 0 keeps them lookups: the
        -- planner would scan every seat and every pin to hash them)
        select coalesce(array_agg(b.c), '{}'), coalesce(array_agg(b.l), '{}')
          into v_bad_c, v_bad_l
          from (select distinct u.c, u.l
                  from unnest(v_c, v_l, v_product, v_seat) as u(c, l, product, seat)
                  left join lateral (select s.section, s.state, s.access from seats s
                                      where s.id = u.seat offset 0) s on true
                  left join lateral (select p.seat_id from seat_pins p
                                      where p.seat_id = u.seat and p.live offset 0) p on true
                 where s.section is distinct from u.product or s.state <> 'open'
                    or s.access <> 'none' or p.seat_id is not null) b;
        -- those lines lose their choice, in one pass over the batch
        if cardinality(v_bad_c) > 0 then
            select jsonb_agg(case when c.n - 1 = any (v_bad_c) then
                       c.v || jsonb_build_object('lines', (
                           select jsonb_agg(case when exists (
                                                  select 1 from unnest(v_bad_c, v_bad_l) b(c, l)
                                                   where b.c = c.n - 1 and b.l = l.n - 1)
                                             then (l.v - 'chosen') || '{"seats": null}'
                                             else l.v end order by l.n)
                             from jsonb_array_elements(c.v->'lines') with ordinality l(v, n)))
                       else c.v end order by c.n)
              into v_checkouts
              from jsonb_array_elements(p_checkouts) with ordinality c(v, n);
        end if;
        -- the checkouts with seats
        select coalesce(array_agg(distinct c.n), '{}')
          into v_seated
          from jsonb_array_elements(v_checkouts) with ordinality c(v, n),
               jsonb_array_elements(c.v->'lines') l(v)
         where l.v->>'claim' = 'seats';
    end if;
    -- each started one with seats says which it was given
    for v_row in select * from hf_start_checkouts(v_checkouts) loop
        v_i := v_i + 1;
        if v_row.status = 'started' and v_i = any (v_seated) then
            select jsonb_object_agg(x.resource_id, x.seats)
              into v_pinned
              from (select h.resource_id, jsonb_agg(p.seat_id order by p.seat_id) as seats
                      from holds h join seat_pins p on p.hold_id = h.id and p.live
                     where h.purchase_id = v_row.hold_id
                     group by h.resource_id) x;
            v_row.detail := coalesce(v_row.detail, '{}') || jsonb_build_object('pinned', v_pinned);
        end if;
        status := v_row.status;
        order_id := v_row.order_id;
        hold_id := v_row.hold_id;
        number := v_row.number;
        created_at := v_row.created_at;
        detail := v_row.detail;
        return next;
    end loop;
end;
$$;

-- A seat plan's import passes jit_above_cost the same way (the rows'
-- jsonb): 300-440 ms of compiling for each 250-seat section loaded.
alter function hf_seat_plan(text, jsonb) set jit = off;
