-- A walk-in's form carries its own id (made when the host stand's page is
-- drawn): sent again after a lost answer, it finds the party it seated and
-- seats nobody twice (src/routes/tables/walk_in.rs). An id another
-- room's walk-in has (a forged form) seats nobody: 'not_ours'.
drop function hf_walk_in(text, integer, text, text, text, timestamptz);

create function hf_walk_in(p_room text, p_party integer, p_set text, p_name text,
                           p_by text, p_now timestamptz, p_once uuid)
returns jsonb
language plpgsql
set jit = off
as $$
declare
    v_set   record;
    v_id    uuid;
    v_until timestamptz;
    v_tables text[];
begin
    if p_party is null or p_party not between 1 and 100 then
        perform hf_bad_input('a party is 1 to 100 guests');
    end if;
    -- lock: the room's nearest time's counters, then the room (the
    -- engine's order); writing the counters row tells memory
    perform 1 from resources r
     where r.id = (select t.resource_id from dining_times t where t.room = p_room
                    order by abs(extract(epoch from t.starts_at - p_now)), t.starts_at
                    limit 1)
       for no key update;
    perform 1 from dining_rooms where collection = p_room and archived_at is null
       for no key update;
    if not found then
        return jsonb_build_object('outcome', 'unknown_room');
    end if;
    -- the same form sent again (an answer lost in a failover): the party
    -- it seated, not a second table
    select w.id, w.tables, w.until into v_id, v_tables, v_until
      from walk_ins w where w.id = p_once and w.room = p_room;
    if found then
        return jsonb_build_object('outcome', 'seated', 'again', true, 'id', v_id,
                                  'tables', to_jsonb(v_tables), 'until', v_until);
    end if;
    if exists (select 1 from walk_ins w where w.id = p_once) then
        return jsonb_build_object('outcome', 'not_ours');
    end if;
    if p_set is not null
       and not exists (select 1 from dining_tables where room = p_room and id = p_set and archived_at is null)
       and not exists (select 1 from dining_joins where room = p_room and id = p_set and archived_at is null) then
        return jsonb_build_object('outcome', 'unknown_set');
    end if;
    select f.set_id, f.tables, f.turn, f.taken_at into v_set
      from hf_walk_in_sets(p_room, p_party, p_now)
           with ordinality as f(set_id, tables, max_party, joined, turn, taken_at, n)
     where p_set is null or f.set_id = p_set
     order by f.n
     limit 1;
    if not found then
        if p_set is null then
            return jsonb_build_object('outcome', 'none_free');
        end if;
        if exists (select 1 from dining_tables where room = p_room and id = p_set
                      and p_party between min_party and max_party)
           or exists (select 1 from dining_joins where room = p_room and id = p_set
                         and p_party between min_party and max_party) then
            return jsonb_build_object('outcome', 'not_free');
        end if;
        return jsonb_build_object('outcome', 'does_not_fit');
    end if;
    v_until := least(p_now + v_set.turn, coalesce(v_set.taken_at, 'infinity'));
    insert into walk_ins (id, room, party, name, tables, seated_at, until, seated_by)
    values (coalesce(p_once, hf_uuid_v7()), p_room, p_party, coalesce(trim(p_name), ''),
            v_set.tables, p_now, v_until, p_by)
    returning id into v_id;
    insert into table_pins (walk_in, room, table_id, during)
    select v_id, p_room, x.id, tstzrange(p_now, v_until, '[)') from unnest(v_set.tables) as x(id);
    update resources r set held = r.held
     where r.id = (select t.resource_id from dining_times t where t.room = p_room
                    order by abs(extract(epoch from t.starts_at - p_now)), t.starts_at
                    limit 1);
    return jsonb_build_object('outcome', 'seated', 'id', v_id, 'tables', to_jsonb(v_set.tables),
                              'until', v_until);
end;
$$;
