-- Holdfast: combined holds. Every hold on one resource queues on that
-- resource's row lock, held until the commit reaches disk. Under contention
-- a process gathers the holds waiting for one resource and sends them here
-- together: one lock, one counter update, one commit for the lot. Each
-- request is still answered on its own, in the order given, with the same
-- outcomes as hf_hold (held | replayed | insufficient | account_cap |
-- unknown_resource), and the CHECK on resources is still the last word.

-- Time-ordered ids (the layout of UUID version 7: 48 bits of milliseconds,
-- then random bits). New holds land at the right edge of the id indexes
-- instead of at random pages, so inserting stays as cheap with millions of
-- old holds in the table as with none.
create function hf_uuid_v7() returns uuid
language sql volatile as $$
    select encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    placing substring(int8send((extract(epoch from clock_timestamp()) * 1000)::bigint) from 3)
                    from 1 for 6),
            52, 1), 53, 1),
        'hex')::uuid;
$$;

alter table holds alter column id set default hf_uuid_v7();

create function hf_hold_many(p_resource text, p_qtys integer[], p_accounts text[],
                             p_keys text[], p_ttl interval default null)
returns setof hold_result
language plpgsql as $$
declare
    s inventory_settings;
    r resources;
    h holds;
    v_n integer := coalesce(cardinality(p_qtys), 0);
    v_now timestamptz;
    v_ttl interval;
    v_available integer;
    v_granted integer := 0;
    v_swept boolean := false;
    v_mine integer;
    v_status text[] := '{}';
    v_replayed_from integer[] := '{}';
    v_replies hold_result[] := '{}';
    v_hold uuid[] := '{}';
    v_left integer[] := '{}';
    res hold_result;
begin
    if v_n not between 1 and 1000 then
        perform hf_bad_input(format('a batch holds 1 to 1000 requests, got %s', v_n));
    end if;
    if coalesce(cardinality(p_accounts), -1) <> v_n or coalesce(cardinality(p_keys), -1) <> v_n then
        perform hf_bad_input('quantities, accounts and keys must be arrays of one length');
    end if;
    for i in 1 .. v_n loop
        if p_qtys[i] is null or p_qtys[i] <= 0 then
            perform hf_bad_input(format('qty must be a positive number of units, got %s',
                                        coalesce(p_qtys[i]::text, 'null')));
        end if;
        if p_accounts[i] is null or length(p_accounts[i]) not between 1 and 200 then
            perform hf_bad_input('account id must be 1 to 200 characters');
        end if;
        if p_keys[i] is not null and length(p_keys[i]) not between 1 and 255 then
            perform hf_bad_input('idempotency key must be 1 to 255 characters');
        end if;
    end loop;
    select * into s from inventory_settings;
    v_ttl := coalesce(p_ttl, s.hold_ttl);
    if v_ttl <= interval '0' then
        perform hf_bad_input(format('hold TTL must be positive, got %s', v_ttl));
    end if;

    -- Without the lock, as in hf_hold: only a refusal of the whole batch
    -- (not even its smallest request fits, and nothing is due to expire).
    select * into r from resources where id = p_resource;
    if not found then
        for i in 1 .. v_n loop
            res := null;
            res.status := 'unknown_resource';
            res.resource_id := p_resource;
            return next res;
        end loop;
        return;
    end if;
    v_available := r.total - r.held - r.sold;
    if v_available < (select min(q) from unnest(p_qtys) q)
       and coalesce(r.next_expiry > clock_timestamp(), true) then
        for i in 1 .. v_n loop
            if p_keys[i] is not null then
                select * into h from holds
                 where resource_id = p_resource and account_id = p_accounts[i]
                   and idempotency_key = p_keys[i];
                if found then
                    return next hf_hold_row('replayed', h, v_available);
                    continue;
                end if;
            end if;
            res := null;
            res.status := 'insufficient';
            res.resource_id := p_resource;
            res.account_id := p_accounts[i];
            res.qty := p_qtys[i];
            res.available := v_available;
            return next res;
        end loop;
        return;
    end if;

    -- lock: this resource
    select * into r from resources where id = p_resource for no key update;
    -- then, with a cap across resources, every account of the batch, in
    -- the order of their lock keys, so two batches can never wait on each
    -- other (hf_hold takes one such lock, also after its resource lock)
    if s.account_cap is not null and s.cap_scope = 'global' then
        perform pg_advisory_xact_lock(k)
           from (select distinct hashtextextended('holdfast.account:' || a, 0) as k
                   from unnest(p_accounts) a order by 1) keys;
    end if;
    v_now := clock_timestamp();
    v_available := r.total - r.held - r.sold;

    -- Decide each request in order; write the grants afterwards in one
    -- statement. The ids are made here, so each answer knows its row.
    for i in 1 .. v_n loop
        v_status[i] := null;
        if p_keys[i] is not null then
            -- earlier in this batch?
            for j in 1 .. i - 1 loop
                if v_status[j] = 'held' and p_keys[j] = p_keys[i] and p_accounts[j] = p_accounts[i] then
                    v_status[i] := 'replayed';
                    v_hold[i] := v_hold[j];
                    v_replayed_from[i] := j;
                    exit;
                end if;
            end loop;
            -- in an earlier call?
            if v_status[i] is null then
                select * into h from holds
                 where resource_id = p_resource and account_id = p_accounts[i]
                   and idempotency_key = p_keys[i];
                if found then
                    v_status[i] := 'replayed';
                    v_hold[i] := h.id;
                    -- answered as the row is now, before a later request's
                    -- lazy expiry could change it
                    v_replies[i] := hf_hold_row('replayed', h, v_available);
                end if;
            end if;
            if v_status[i] is not null then
                v_left[i] := v_available;
                continue;
            end if;
        end if;

        -- expired holds count as free: look once, when needed and due
        if v_available < p_qtys[i] and not v_swept and r.next_expiry <= v_now then
            perform hf_expire_due_plain(p_resource, v_now, 'lazy-expiry', null);
            v_swept := true;
            select * into r from resources where id = p_resource;
            -- the counters do not include this batch's grants yet
            v_available := r.total - r.held - r.sold - v_granted;
        end if;

        if v_available < p_qtys[i] then
            v_status[i] := 'insufficient';
            v_left[i] := v_available;
            continue;
        end if;

        if s.account_cap is not null then
            select coalesce(sum(qty), 0) into v_mine from holds
             where account_id = p_accounts[i]
               and (s.cap_scope = 'global' or resource_id = p_resource)
               and (state = 'awaiting_payment' or (state = 'held' and expires_at > v_now));
            -- and what this batch already granted the same account
            for j in 1 .. i - 1 loop
                if v_status[j] = 'held' and p_accounts[j] = p_accounts[i] then
                    v_mine := v_mine + p_qtys[j];
                end if;
            end loop;
            if v_mine + p_qtys[i] > s.account_cap then
                v_status[i] := 'account_cap';
                v_left[i] := greatest(s.account_cap - v_mine, 0);
                continue;
            end if;
        end if;

        v_status[i] := 'held';
        v_hold[i] := hf_uuid_v7();
        v_granted := v_granted + p_qtys[i];
        v_available := v_available - p_qtys[i];
        v_left[i] := v_available;
    end loop;

    if v_granted > 0 then
        insert into holds (id, resource_id, account_id, qty, idempotency_key, expires_at)
        select v_hold[i], p_resource, p_accounts[i], p_qtys[i], p_keys[i], v_now + v_ttl
          from generate_subscripts(p_qtys, 1) as i
         where v_status[i] = 'held';
        insert into hold_events (hold_id, kind, to_state, actor, detail)
        select v_hold[i], 'held', 'held', p_accounts[i],
               jsonb_build_object('qty', p_qtys[i], 'ttl_seconds', extract(epoch from v_ttl))
          from generate_subscripts(p_qtys, 1) as i
         where v_status[i] = 'held';
        -- one counter update for the batch; the CHECK still has the last word
        update resources
           set held = held + v_granted,
               next_expiry = least(next_expiry, v_now + v_ttl),
               updated_at = v_now
         where id = p_resource;
    end if;

    -- the answers, in the order asked
    for i in 1 .. v_n loop
        res := null;
        if v_status[i] = 'held' then
            -- a fresh row: its every column is known here
            res.status := 'held';
            res.hold_id := v_hold[i];
            res.resource_id := p_resource;
            res.account_id := p_accounts[i];
            res.qty := p_qtys[i];
            res.state := 'held';
            res.expires_at := v_now + v_ttl;
            res.available := v_left[i];
            res.extensions := 0;
        elsif v_status[i] = 'replayed' and v_replayed_from[i] is not null then
            -- a key repeated in this batch: its first request's fresh row
            res.status := 'replayed';
            res.hold_id := v_hold[i];
            res.resource_id := p_resource;
            res.account_id := p_accounts[i];
            res.qty := p_qtys[v_replayed_from[i]];
            res.state := 'held';
            res.expires_at := v_now + v_ttl;
            res.available := v_left[i];
            res.extensions := 0;
        elsif v_status[i] = 'replayed' then
            res := v_replies[i];
        else
            res.status := v_status[i];
            res.resource_id := p_resource;
            res.account_id := p_accounts[i];
            res.qty := p_qtys[i];
            res.available := v_left[i];
        end if;
        return next res;
    end loop;
    return;
end;
$$;
