-- GENERATED from the migrated database by tests/api/schema/tables.rs: do not edit.
-- What each table holds now, whichever migrations wrote it: its columns, their
-- types and defaults, its constraints, indexes and triggers; then sequences of
-- their own, views and types (not sqlx's _sqlx_migrations). The functions,
-- and the composite types they return, are in functions.sql. Regenerate
-- both after a migration:
--   HOLDFAST_WRITE_SCHEMA=1 cargo test --test api schema::

-- extension btree_gist (made by 0160_tables.sql)
create extension btree_gist;

-- table api_idempotency (made by 0062_api_idempotency.sql)
create table api_idempotency (
    api_key_id      text not null,
    idempotency_key text not null,
    request_hash    bytea not null,
    status          integer,
    response        jsonb,
    created_at      timestamp with time zone not null default now(),
    constraint api_idempotency_pkey PRIMARY KEY (api_key_id, idempotency_key),
    constraint api_idempotency_answered CHECK (((status IS NULL) = (response IS NULL))),
    constraint api_idempotency_hash_shape CHECK ((length(request_hash) = 32)),
    constraint api_idempotency_key_shape CHECK ((idempotency_key ~ '^[A-Za-z0-9_-]{1,64}$'::text)),
    constraint api_idempotency_api_key_id_fkey FOREIGN KEY (api_key_id) REFERENCES api_keys(id)
);
CREATE INDEX api_idempotency_created ON public.api_idempotency USING btree (created_at);

-- table api_keys (made by 0061_api_keys.sql)
create table api_keys (
    id           text not null,
    name         text not null,
    scopes       text[] not null,
    secret_hash  bytea not null,
    created_by   text not null,
    created_at   timestamp with time zone not null default now(),
    last_used_at timestamp with time zone,
    revoked_at   timestamp with time zone,
    revoked_by   text,
    constraint api_keys_pkey PRIMARY KEY (id),
    constraint api_key_hash_shape CHECK ((length(secret_hash) = 32)),
    constraint api_key_id_shape CHECK ((id ~ '^[a-f0-9]{12}$'::text)),
    constraint api_key_name_shape CHECK (((length(name) >= 1) AND (length(name) <= 100))),
    constraint api_key_revoked_by CHECK (((revoked_at IS NULL) = (revoked_by IS NULL))),
    constraint api_key_scopes CHECK (((cardinality(scopes) >= 1) AND (cardinality(scopes) <= 10)))
);
CREATE TRIGGER api_keys_notify_catalogue AFTER INSERT OR DELETE OR UPDATE OF name, scopes, secret_hash, revoked_at ON public.api_keys FOR EACH STATEMENT EXECUTE FUNCTION hf_notify_catalogue();

-- table basket_lines (made by 0004_shop.sql; changed by 0017_known_outcomes.sql,
--   0019_staff_run_the_sale.sql, 0180_seating.sql)
create table basket_lines (
    basket_id   text not null,
    product_id  text not null,
    qty         integer not null,
    added_at    timestamp with time zone not null default now(),
    last_add    uuid,
    unlocked_by text,
    seat_labels text[],
    seat_best   text,
    constraint basket_lines_pkey PRIMARY KEY (basket_id, product_id),
    constraint basket_id_shape CHECK (((length(basket_id) >= 16) AND (length(basket_id) <= 128))),
    constraint basket_lines_qty_check CHECK (((qty >= 1) AND (qty <= 100))),
    constraint basket_seat_choice CHECK ((((seat_labels IS NULL) OR (seat_best IS NULL)) AND ((seat_best IS NULL) OR (seat_best = ANY (ARRAY['together'::text, 'split'::text]))) AND ((seat_labels IS NULL) OR (cardinality(seat_labels) = qty)))),
    constraint basket_lines_product_id_fkey FOREIGN KEY (product_id) REFERENCES products(id),
    constraint basket_lines_unlocked_by_fkey FOREIGN KEY (unlocked_by) REFERENCES vouchers(code)
);

-- table bookings (made by 0160_tables.sql)
create table bookings (
    hold_id                 uuid not null,
    order_id                uuid not null,
    room                    text not null,
    product_id              text not null,
    party                   integer not null,
    starts_at               timestamp with time zone not null,
    ends_at                 timestamp with time zone not null,
    tables                  text[] not null,
    deposit_per_cover_minor bigint not null,
    cancel_until            timestamp with time zone not null,
    no_show_at              timestamp with time zone,
    no_show_by              text,
    created_at              timestamp with time zone not null default now(),
    constraint bookings_pkey PRIMARY KEY (hold_id),
    constraint booking_no_show_says_who CHECK (((no_show_at IS NULL) = (no_show_by IS NULL))),
    constraint booking_party CHECK (((party >= 1) AND (party <= 100))),
    constraint booking_stay CHECK ((ends_at > starts_at)),
    constraint booking_tables CHECK ((cardinality(tables) >= 1)),
    constraint bookings_hold_id_fkey FOREIGN KEY (hold_id) REFERENCES holds(id),
    constraint bookings_order_id_fkey FOREIGN KEY (order_id) REFERENCES orders(id),
    constraint bookings_product_id_fkey FOREIGN KEY (product_id) REFERENCES products(id),
    constraint bookings_room_fkey FOREIGN KEY (room) REFERENCES dining_rooms(collection)
);
CREATE INDEX bookings_by_order ON public.bookings USING btree (order_id);
CREATE INDEX bookings_by_room_day ON public.bookings USING btree (room, starts_at);

-- table collection_kinds (made by 0080_kinds_own_their_differences.sql)
create table collection_kinds (
    kind text not null,
    constraint collection_kinds_pkey PRIMARY KEY (kind)
);

-- table collections (made by 0019_staff_run_the_sale.sql; changed by
--   0080_kinds_own_their_differences.sql, 0103_images.sql, 0123_drafts.sql)
create table collections (
    id          text not null,
    kind        text not null,
    title       text not null,
    lede        text not null default ''::text,
    starts_at   timestamp with time zone,
    doors_at    timestamp with time zone,
    venue       text not null default ''::text,
    "position"  integer not null default 0,
    archived_at timestamp with time zone,
    created_at  timestamp with time zone not null default now(),
    updated_at  timestamp with time zone not null default now(),
    ends_at     timestamp with time zone,
    image_id    text,
    draft       boolean not null default false,
    constraint collections_pkey PRIMARY KEY (id),
    constraint collection_ends_after_start CHECK (((ends_at IS NULL) OR (starts_at IS NULL) OR (ends_at > starts_at))),
    constraint collection_id_shape CHECK ((id ~ '^[a-z0-9][a-z0-9-]{0,99}$'::text)),
    constraint collection_title_shape CHECK (((length(title) >= 1) AND (length(title) <= 200))),
    constraint collection_words_shape CHECK (((length(lede) <= 1000) AND (length(venue) <= 200))),
    constraint collection_kind_known FOREIGN KEY (kind) REFERENCES collection_kinds(kind),
    constraint collections_image_id_fkey FOREIGN KEY (image_id) REFERENCES images(id)
);
CREATE TRIGGER collections_image_notify_catalogue AFTER UPDATE OF image_id ON public.collections FOR EACH STATEMENT EXECUTE FUNCTION hf_notify_catalogue();

-- table dining_joins (made by 0160_tables.sql)
create table dining_joins (
    room        text not null,
    id          text not null,
    tables      text[] not null,
    min_party   integer not null,
    max_party   integer not null,
    priority    integer not null default 100,
    archived_at timestamp with time zone,
    constraint dining_joins_pkey PRIMARY KEY (room, id),
    constraint dining_join_id_shape CHECK ((id ~ '^[A-Za-z0-9][A-Za-z0-9 +._-]{0,79}$'::text)),
    constraint dining_join_party CHECK (((min_party >= 1) AND (min_party <= max_party) AND (max_party <= 100))),
    constraint dining_join_priority CHECK (((priority >= 0) AND (priority <= 10000))),
    constraint dining_join_tables CHECK (((cardinality(tables) >= 2) AND (cardinality(tables) <= 8))),
    constraint dining_joins_room_fkey FOREIGN KEY (room) REFERENCES dining_rooms(collection)
);
CREATE TRIGGER dining_joins_notify_catalogue AFTER INSERT OR DELETE OR UPDATE ON public.dining_joins FOR EACH STATEMENT EXECUTE FUNCTION hf_notify_catalogue();

-- table dining_periods (made by 0160_tables.sql)
create table dining_periods (
    room               text not null,
    name               text not null,
    weekdays           integer[] not null,
    opens              time without time zone not null,
    last_seating       time without time zone not null,
    deposit_minor      bigint not null default 0,
    deposit_from_party integer not null default 1,
    cancel_hours       integer not null default 24,
    constraint dining_periods_pkey PRIMARY KEY (room, name),
    constraint dining_period_cancel_hours CHECK (((cancel_hours >= 0) AND (cancel_hours <= 720))),
    constraint dining_period_deposit CHECK ((((deposit_minor >= 0) AND (deposit_minor <= 100000000)) AND ((deposit_from_party >= 1) AND (deposit_from_party <= 100)))),
    constraint dining_period_hours CHECK ((opens <= last_seating)),
    constraint dining_period_name_shape CHECK ((name ~ '^[a-z][a-z0-9-]{0,39}$'::text)),
    constraint dining_period_weekdays CHECK (((weekdays <@ ARRAY[1, 2, 3, 4, 5, 6, 7]) AND (cardinality(weekdays) >= 1))),
    constraint dining_periods_room_fkey FOREIGN KEY (room) REFERENCES dining_rooms(collection)
);
CREATE TRIGGER dining_periods_notify_catalogue AFTER INSERT OR DELETE OR UPDATE ON public.dining_periods FOR EACH STATEMENT EXECUTE FUNCTION hf_notify_catalogue();

-- table dining_rooms (made by 0160_tables.sql; changed by 0161_tables_fill.sql,
--   0240_table_drop.sql)
create table dining_rooms (
    collection         text not null,
    name               text not null,
    description        text not null default ''::text,
    currency           text not null,
    interval_minutes   integer not null default 15,
    pacing             integer not null,
    days_ahead         integer not null default 30,
    book_until_minutes integer not null default 60,
    largest_party      integer not null default 10,
    closed_days        date[] not null default '{}'::date[],
    chooser            text not null default 'smallest'::text,
    archived_at        timestamp with time zone,
    updated_at         timestamp with time zone not null default now(),
    least_fill         integer not null default 0,
    bookings_open_at   timestamp with time zone,
    constraint dining_rooms_pkey PRIMARY KEY (collection),
    constraint dining_room_book_until CHECK (((book_until_minutes >= 0) AND (book_until_minutes <= 10080))),
    constraint dining_room_chooser_known CHECK ((chooser = ANY (ARRAY['smallest'::text, 'first_fit'::text]))),
    constraint dining_room_currency CHECK ((currency ~ '^[a-z]{3}$'::text)),
    constraint dining_room_days_ahead CHECK (((days_ahead >= 0) AND (days_ahead <= 366))),
    constraint dining_room_interval CHECK ((interval_minutes = ANY (ARRAY[15, 30, 45, 60]))),
    constraint dining_room_largest_party CHECK (((largest_party >= 1) AND (largest_party <= 100))),
    constraint dining_room_least_fill CHECK (((least_fill >= 0) AND (least_fill <= 100))),
    constraint dining_room_name_shape CHECK ((((length(name) >= 1) AND (length(name) <= 200)) AND (length(description) <= 2000))),
    constraint dining_room_pacing CHECK (((pacing >= 1) AND (pacing <= 10000))),
    constraint dining_rooms_collection_fkey FOREIGN KEY (collection) REFERENCES collections(id)
);
CREATE TRIGGER dining_rooms_notify_catalogue AFTER INSERT OR DELETE OR UPDATE ON public.dining_rooms FOR EACH STATEMENT EXECUTE FUNCTION hf_notify_catalogue();

-- table dining_tables (made by 0160_tables.sql)
create table dining_tables (
    room        text not null,
    id          text not null,
    min_party   integer not null default 1,
    max_party   integer not null,
    area        text not null default ''::text,
    priority    integer not null default 100,
    "position"  integer not null default 0,
    archived_at timestamp with time zone,
    constraint dining_tables_pkey PRIMARY KEY (room, id),
    constraint dining_table_area_shape CHECK ((length(area) <= 100)),
    constraint dining_table_id_shape CHECK ((id ~ '^[A-Za-z0-9][A-Za-z0-9 ._-]{0,39}$'::text)),
    constraint dining_table_party CHECK (((min_party >= 1) AND (min_party <= max_party) AND (max_party <= 100))),
    constraint dining_table_priority CHECK (((priority >= 0) AND (priority <= 10000))),
    constraint dining_tables_room_fkey FOREIGN KEY (room) REFERENCES dining_rooms(collection)
);
CREATE TRIGGER dining_tables_notify_catalogue AFTER INSERT OR DELETE OR UPDATE ON public.dining_tables FOR EACH STATEMENT EXECUTE FUNCTION hf_notify_catalogue();

-- table dining_times (made by 0160_tables.sql)
create table dining_times (
    product_id  text not null,
    room        text not null,
    period      text not null,
    resource_id text not null,
    starts_at   timestamp with time zone not null,
    constraint dining_times_pkey PRIMARY KEY (product_id),
    constraint dining_time_once UNIQUE (room, starts_at),
    constraint dining_time_period_known FOREIGN KEY (room, period) REFERENCES dining_periods(room, name) DEFERRABLE INITIALLY DEFERRED,
    constraint dining_times_product_id_fkey FOREIGN KEY (product_id) REFERENCES products(id),
    constraint dining_times_resource_id_fkey FOREIGN KEY (resource_id) REFERENCES resources(id),
    constraint dining_times_room_fkey FOREIGN KEY (room) REFERENCES dining_rooms(collection)
);
CREATE INDEX dining_times_by_resource ON public.dining_times USING btree (resource_id);

-- table dining_turns (made by 0160_tables.sql)
create table dining_turns (
    room        text not null,
    up_to_party integer not null,
    minutes     integer not null,
    constraint dining_turns_pkey PRIMARY KEY (room, up_to_party),
    constraint dining_turn_minutes CHECK ((((minutes >= 15) AND (minutes <= 720)) AND ((minutes % 15) = 0))),
    constraint dining_turn_party CHECK (((up_to_party >= 1) AND (up_to_party <= 100))),
    constraint dining_turns_room_fkey FOREIGN KEY (room) REFERENCES dining_rooms(collection)
);
CREATE TRIGGER dining_turns_notify_catalogue AFTER INSERT OR DELETE OR UPDATE ON public.dining_turns FOR EACH STATEMENT EXECUTE FUNCTION hf_notify_catalogue();

-- table hold_events (made by 0001_inventory_schema.sql; changed by 0012_after_the_sale.sql,
--   0090_settling.sql)
create table hold_events (
    id         bigint not null generated always as identity,
    hold_id    uuid not null,
    at         timestamp with time zone not null default clock_timestamp(),
    kind       text not null,
    from_state text,
    to_state   text not null,
    actor      text not null,
    detail     jsonb not null default '{}'::jsonb,
    constraint hold_events_pkey PRIMARY KEY (id),
    constraint event_kind_known CHECK ((kind = ANY (ARRAY['settling'::text, 'reclaimed'::text, 'held'::text, 'payment_started'::text, 'confirmed'::text, 'released'::text, 'expired'::text, 'extended'::text, 'repaired'::text, 'returned'::text]))),
    constraint hold_events_hold_id_fkey FOREIGN KEY (hold_id) REFERENCES holds(id)
);
CREATE INDEX hold_events_by_hold ON public.hold_events USING btree (hold_id, id);
CREATE TRIGGER hold_events_append_only BEFORE DELETE OR UPDATE OR TRUNCATE ON public.hold_events FOR EACH STATEMENT EXECUTE FUNCTION hold_events_append_only();

-- table holds (made by 0001_inventory_schema.sql; changed by 0006_combined_holds.sql,
--   0012_after_the_sale.sql, 0090_settling.sql)
create table holds (
    id                 uuid not null default hf_uuid_v7(),
    basket_id          uuid,
    purchase_id        uuid generated always as (COALESCE(basket_id, id)) stored,
    resource_id        text not null,
    account_id         text not null,
    qty                integer not null,
    state              text not null default 'held'::text,
    idempotency_key    text,
    payment_ref        text,
    created_at         timestamp with time zone not null default now(),
    expires_at         timestamp with time zone not null,
    payment_started_at timestamp with time zone,
    payment_deadline   timestamp with time zone,
    confirmed_at       timestamp with time zone,
    extensions         integer not null default 0,
    ended_at           timestamp with time zone,
    ended_by           text,
    end_reason         text,
    returned           integer not null default 0,
    settle_method      text,
    settling_at        timestamp with time zone,
    settle_deadline    timestamp with time zone,
    settle_grace       interval,
    reclaims           uuid,
    constraint holds_pkey PRIMARY KEY (id),
    constraint account_id_shape CHECK (((length(account_id) >= 1) AND (length(account_id) <= 200))),
    constraint confirmed_has_payment CHECK (((state = 'confirmed'::text) = (payment_ref IS NOT NULL))),
    constraint ended_says_who_and_why CHECK (((state = ANY (ARRAY['released'::text, 'expired'::text])) = ((ended_at IS NOT NULL) AND (ended_by IS NOT NULL) AND (end_reason IS NOT NULL)))),
    constraint extensions_non_negative CHECK ((extensions >= 0)),
    constraint idempotency_key_shape CHECK (((idempotency_key IS NULL) OR ((length(idempotency_key) >= 1) AND (length(idempotency_key) <= 255)))),
    constraint paying_has_deadline CHECK (((state <> 'awaiting_payment'::text) OR (payment_deadline IS NOT NULL))),
    constraint qty_positive CHECK ((qty > 0)),
    constraint reclaim_is_a_sale CHECK (((reclaims IS NULL) OR (state = 'confirmed'::text))),
    constraint returned_only_when_sold CHECK (((returned = 0) OR (state = 'confirmed'::text))),
    constraint returned_within_qty CHECK (((returned >= 0) AND (returned <= qty))),
    constraint settling_after_start CHECK (((settle_deadline IS NULL) OR (settle_deadline > settling_at))),
    constraint settling_covers_grace CHECK (((settle_deadline IS NULL) OR ((settle_grace >= '00:00:00'::interval) AND (payment_deadline >= (settle_deadline + settle_grace))))),
    constraint settling_shape CHECK ((((settle_method IS NULL) = (settling_at IS NULL)) AND ((settling_at IS NULL) = (settle_deadline IS NULL)) AND ((settle_deadline IS NULL) = (settle_grace IS NULL)))),
    constraint settling_was_paying CHECK (((settle_deadline IS NULL) OR ((state <> 'held'::text) AND (payment_started_at IS NOT NULL)))),
    constraint state_known CHECK ((state = ANY (ARRAY['held'::text, 'awaiting_payment'::text, 'confirmed'::text, 'released'::text, 'expired'::text]))),
    constraint holds_reclaims_fkey FOREIGN KEY (reclaims) REFERENCES holds(id),
    constraint holds_resource_id_fkey FOREIGN KEY (resource_id) REFERENCES resources(id),
    constraint payment_ref_claimed FOREIGN KEY (payment_ref, purchase_id) REFERENCES payment_refs(payment_ref, purchase_id)
);
CREATE INDEX holds_due_paying ON public.holds USING btree (resource_id, payment_deadline) WHERE (state = 'awaiting_payment'::text);
CREATE INDEX holds_due_plain ON public.holds USING btree (resource_id, expires_at) WHERE (state = 'held'::text);
CREATE UNIQUE INDEX holds_idempotency ON public.holds USING btree (resource_id, account_id, idempotency_key) WHERE (idempotency_key IS NOT NULL);
CREATE INDEX holds_live_by_account ON public.holds USING btree (account_id, resource_id) WHERE (state = ANY (ARRAY['held'::text, 'awaiting_payment'::text]));
CREATE UNIQUE INDEX holds_payment_ref ON public.holds USING btree (payment_ref, resource_id) WHERE (payment_ref IS NOT NULL);
CREATE INDEX holds_purchase ON public.holds USING btree (purchase_id);
CREATE INDEX holds_settling ON public.holds USING btree (resource_id, settle_deadline) WHERE ((state = 'awaiting_payment'::text) AND (settle_deadline IS NOT NULL));
CREATE INDEX holds_state_created ON public.holds USING btree (state, created_at);
CREATE TRIGGER holds_end_pins AFTER UPDATE OF state ON public.holds FOR EACH ROW WHEN (((new.state = ANY (ARRAY['released'::text, 'expired'::text])) AND (old.state IS DISTINCT FROM new.state))) EXECUTE FUNCTION hf_end_pins();
CREATE TRIGGER holds_end_seat_pins AFTER UPDATE OF state ON public.holds FOR EACH ROW WHEN (((new.state = ANY (ARRAY['released'::text, 'expired'::text])) AND (old.state = ANY (ARRAY['held'::text, 'awaiting_payment'::text])))) EXECUTE FUNCTION hf_seat_pins_end();
CREATE TRIGGER holds_lines_immutable BEFORE UPDATE OF resource_id, basket_id, account_id, qty ON public.holds FOR EACH ROW WHEN (((old.resource_id IS DISTINCT FROM new.resource_id) OR (old.basket_id IS DISTINCT FROM new.basket_id) OR (old.account_id IS DISTINCT FROM new.account_id) OR (old.qty IS DISTINCT FROM new.qty))) EXECUTE FUNCTION holds_lines_immutable();
CREATE TRIGGER holds_returned_end_pins AFTER UPDATE OF returned ON public.holds FOR EACH ROW WHEN (((new.returned = new.qty) AND (old.returned < new.qty))) EXECUTE FUNCTION hf_end_pins();

-- table image_variants (made by 0103_images.sql)
create table image_variants (
    image_id     text not null,
    width        integer not null,
    content_type text not null,
    bytes        bytea not null,
    constraint image_variants_pkey PRIMARY KEY (image_id, width),
    constraint image_variant_type CHECK ((content_type = ANY (ARRAY['image/jpeg'::text, 'image/png'::text]))),
    constraint image_variant_width CHECK (((width >= 1) AND (width <= 6000))),
    constraint image_variants_image_id_fkey FOREIGN KEY (image_id) REFERENCES images(id)
);

-- table images (made by 0103_images.sql)
create table images (
    id           text not null,
    content_type text not null,
    width        integer not null,
    height       integer not null,
    bytes        bytea not null,
    created_at   timestamp with time zone not null default now(),
    constraint images_pkey PRIMARY KEY (id),
    constraint image_id_shape CHECK ((id ~ '^[0-9a-f]{32}$'::text)),
    constraint image_size CHECK ((((width >= 1) AND (width <= 6000)) AND ((height >= 1) AND (height <= 6000)) AND ((length(bytes) >= 1) AND (length(bytes) <= 5242880)))),
    constraint image_type_known CHECK ((content_type = ANY (ARRAY['image/jpeg'::text, 'image/png'::text])))
);

-- table inventory_settings (made by 0001_inventory_schema.sql; changed by 0090_settling.sql)
create table inventory_settings (
    singleton      boolean not null default true,
    hold_ttl       interval not null default '00:15:00'::interval,
    payment_window interval not null default '00:30:00'::interval,
    account_cap    integer,
    cap_scope      text not null default 'resource'::text,
    max_extensions integer not null default 1,
    extension      interval not null default '00:05:00'::interval,
    updated_at     timestamp with time zone not null default now(),
    settle_grace   interval not null default '1 day'::interval,
    constraint inventory_settings_pkey PRIMARY KEY (singleton),
    constraint account_cap_positive CHECK (((account_cap IS NULL) OR (account_cap > 0))),
    constraint cap_scope_known CHECK ((cap_scope = ANY (ARRAY['resource'::text, 'global'::text]))),
    constraint extension_positive CHECK ((extension > '00:00:00'::interval)),
    constraint hold_ttl_positive CHECK ((hold_ttl > '00:00:00'::interval)),
    constraint inventory_settings_singleton_check CHECK (singleton),
    constraint max_extensions_non_negative CHECK ((max_extensions >= 0)),
    constraint payment_window_exceeds_ttl CHECK ((payment_window > hold_ttl)),
    constraint settle_grace_non_negative CHECK ((settle_grace >= '00:00:00'::interval)),
    constraint settle_window_exceeds_payment_window TRIGGER
);
CREATE CONSTRAINT TRIGGER settle_window_exceeds_payment_window AFTER UPDATE OF payment_window ON public.inventory_settings NOT DEFERRABLE INITIALLY IMMEDIATE FOR EACH ROW EXECUTE FUNCTION hf_settle_windows_exceed_payment_window();

-- table login_throttle (made by 0005_staff.sql; changed by 0011_fair_sale.sql)
create table login_throttle (
    key               text not null,
    attempts          integer not null default 0,
    window_started_at timestamp with time zone not null default now(),
    locked_until      timestamp with time zone,
    constraint login_throttle_pkey PRIMARY KEY (key),
    constraint throttle_attempts_non_negative CHECK ((attempts >= 0)),
    constraint throttle_key_shape CHECK (((length(key) >= 1) AND (length(key) <= 320)))
);

-- table order_items (made by 0004_shop.sql as order_codes; renamed by 0200_items.sql; changed by
--   0012_after_the_sale.sql, 0180_seating.sql, 0200_items.sql)
create table order_items (
    code       text not null,
    order_id   uuid not null,
    product_id text not null,
    created_at timestamp with time zone not null default now(),
    seat_id    bigint,
    id         bigint not null generated always as identity,
    booking    uuid,
    state      text not null default 'valid'::text,
    state_at   timestamp with time zone,
    constraint order_items_pkey PRIMARY KEY (id),
    constraint item_once_per_code UNIQUE (code, product_id),
    constraint item_code_one_order EXCLUDE USING gist (code WITH =, order_id WITH <>),
    constraint item_code_shape CHECK ((code ~ '^[A-Z0-9][A-Z0-9-]{3,63}$'::text)),
    constraint item_state_known CHECK ((state = ANY (ARRAY['valid'::text, 'used'::text, 'refunded'::text, 'cancelled'::text]))),
    constraint item_state_when CHECK (((state = 'valid'::text) = (state_at IS NULL))),
    constraint order_items_booking_fkey FOREIGN KEY (booking) REFERENCES bookings(hold_id),
    constraint order_items_order_id_fkey FOREIGN KEY (order_id) REFERENCES orders(id),
    constraint order_items_product_id_fkey FOREIGN KEY (product_id) REFERENCES products(id),
    constraint order_items_seat_id_fkey FOREIGN KEY (seat_id) REFERENCES seats(id)
);
CREATE INDEX order_items_by_booking ON public.order_items USING btree (booking) WHERE (booking IS NOT NULL);
CREATE INDEX order_items_by_order ON public.order_items USING btree (order_id);
CREATE TRIGGER order_items_one_way BEFORE UPDATE ON public.order_items FOR EACH ROW EXECUTE FUNCTION hf_item_state_guard();
CREATE TRIGGER order_items_seats AFTER INSERT ON public.order_items REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION hf_seat_codes();
comment on table order_items is 'What an order gives a person, each with its code and state; items share a code only where their kind says one time and place may';

-- table order_lines (made by 0004_shop.sql; changed by 0012_after_the_sale.sql,
--   0019_staff_run_the_sale.sql)
create table order_lines (
    order_id         uuid not null,
    product_id       text not null,
    name             text not null,
    qty              integer not null,
    unit_price_minor bigint not null,
    refunded_qty     integer not null default 0,
    paid_minor       bigint,
    constraint order_lines_pkey PRIMARY KEY (order_id, product_id),
    constraint line_refunded_within_qty CHECK (((refunded_qty >= 0) AND (refunded_qty <= qty))),
    constraint order_line_paid CHECK (((paid_minor IS NULL) OR (paid_minor >= 0))),
    constraint order_lines_qty_check CHECK ((qty > 0)),
    constraint order_lines_unit_price_minor_check CHECK ((unit_price_minor >= 0)),
    constraint order_lines_order_id_fkey FOREIGN KEY (order_id) REFERENCES orders(id),
    constraint order_lines_product_id_fkey FOREIGN KEY (product_id) REFERENCES products(id)
);

-- table order_refunds (made by 0012_after_the_sale.sql)
create table order_refunds (
    id                bigint not null generated always as identity,
    order_id          uuid not null,
    amount_minor      bigint not null,
    units             jsonb not null,
    reason            text not null,
    restocked         boolean not null,
    override_redeemed boolean not null default false,
    refunded_by       text not null,
    request_key       text,
    created_at        timestamp with time zone not null default now(),
    constraint order_refunds_pkey PRIMARY KEY (id),
    constraint order_refunds_request_key_key UNIQUE (request_key),
    constraint order_refund_by_shape CHECK (((length(refunded_by) >= 1) AND (length(refunded_by) <= 254))),
    constraint order_refund_key_shape CHECK (((request_key IS NULL) OR (request_key ~ '^[A-Za-z0-9_-]{16,64}$'::text))),
    constraint order_refund_not_negative CHECK ((amount_minor >= 0)),
    constraint order_refund_reason_shape CHECK (((length(reason) >= 1) AND (length(reason) <= 500))),
    constraint order_refunds_order_id_fkey FOREIGN KEY (order_id) REFERENCES orders(id)
);
CREATE INDEX order_refunds_by_order ON public.order_refunds USING btree (order_id, id);
CREATE TRIGGER order_refunds_append_only BEFORE DELETE OR UPDATE OR TRUNCATE ON public.order_refunds FOR EACH STATEMENT EXECUTE FUNCTION order_refunds_append_only();
CREATE TRIGGER order_refunds_webhook AFTER INSERT ON public.order_refunds FOR EACH ROW EXECUTE FUNCTION hf_webhook_order_refunded();

-- table orders (made by 0004_shop.sql; changed by 0007_reconciliation.sql, 0011_fair_sale.sql,
--   0012_after_the_sale.sql, 0019_staff_run_the_sale.sql, 0090_settling.sql,
--   0102_order_numbers.sql, 0105_order_pay_method.sql, 0160_tables.sql, 0200_items.sql)
create table orders (
    id                  uuid not null default gen_random_uuid(),
    token               text not null,
    checkout_key        text not null,
    state               text not null default 'pending'::text,
    customer_name       text not null,
    customer_email      text not null,
    currency            text not null,
    amount_minor        bigint not null,
    hold_id             uuid,
    provider            text not null,
    provider_session_id text,
    provider_url        text,
    provider_expires_at timestamp with time zone,
    payment_ref         text,
    flag                text,
    created_at          timestamp with time zone not null default now(),
    paid_at             timestamp with time zone,
    updated_at          timestamp with time zone not null default now(),
    reconcile_after     timestamp with time zone,
    reconciled_at       timestamp with time zone,
    reconcile_attempts  integer not null default 0,
    reconcile_note      text,
    email_key           text,
    client_address      text,
    refunded_minor      bigint not null default 0,
    voucher_code        text,
    discount_minor      bigint not null default 0,
    settle_method       text,
    settling_until      timestamp with time zone,
    late_money          text,
    late_money_at       timestamp with time zone,
    number              text not null default hf_order_number(),
    pay_method          text,
    customer_phone      text,
    constraint orders_pkey PRIMARY KEY (id),
    constraint orders_checkout_key_key UNIQUE (checkout_key),
    constraint orders_number_key UNIQUE (number),
    constraint orders_provider_session_id_key UNIQUE (provider_session_id),
    constraint orders_token_key UNIQUE (token),
    constraint order_amount_non_negative CHECK ((amount_minor >= 0)),
    constraint order_currency_iso CHECK ((currency ~ '^[a-z]{3}$'::text)),
    constraint order_customer_shape CHECK ((((length(customer_name) >= 1) AND (length(customer_name) <= 200)) AND ((length(customer_email) >= 3) AND (length(customer_email) <= 254)))),
    constraint order_discount CHECK ((discount_minor >= 0)),
    constraint order_late_money_known CHECK ((late_money = ANY (ARRAY['claimed_again'::text, 'refunded'::text]))),
    constraint order_late_money_when CHECK (((late_money IS NULL) = (late_money_at IS NULL))),
    constraint order_limit_keys_shape CHECK (((length(email_key) <= 254) AND (length(client_address) <= 64))),
    constraint order_number_shape CHECK ((number ~ '^[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}$'::text)),
    constraint order_pay_method_known CHECK ((pay_method = ANY (ARRAY['card'::text, 'upi'::text, 'netbanking'::text, 'sepa_debit'::text]))),
    constraint order_phone_shape CHECK ((customer_phone ~ '^\+?[0-9][0-9 ()./-]{4,29}$'::text)),
    constraint order_provider_known CHECK ((provider = ANY (ARRAY['stripe'::text, 'razorpay'::text]))),
    constraint order_refunded_within_paid CHECK (((refunded_minor >= 0) AND (refunded_minor <= amount_minor))),
    constraint order_settling_shape CHECK (((state <> 'settling'::text) OR ((settle_method IS NOT NULL) AND (settling_until IS NOT NULL)))),
    constraint order_state_known CHECK ((state = ANY (ARRAY['settling'::text, 'pending'::text, 'paid'::text, 'expired'::text, 'cancelled'::text, 'refund_pending'::text, 'refunded'::text]))),
    constraint paid_order_has_payment CHECK (((state <> 'paid'::text) OR ((payment_ref IS NOT NULL) AND (paid_at IS NOT NULL)))),
    constraint reconcile_attempts_non_negative CHECK ((reconcile_attempts >= 0)),
    constraint reconcile_note_short CHECK ((length(reconcile_note) <= 500)),
    constraint orders_voucher_code_fkey FOREIGN KEY (voucher_code) REFERENCES vouchers(code)
);
CREATE INDEX orders_live_by_address ON public.orders USING btree (client_address) WHERE (state = ANY (ARRAY['pending'::text, 'settling'::text]));
CREATE INDEX orders_live_by_email ON public.orders USING btree (email_key) WHERE (state = ANY (ARRAY['pending'::text, 'settling'::text]));
CREATE INDEX orders_settling ON public.orders USING btree (settling_until) WHERE (state = 'settling'::text);
CREATE INDEX orders_state_created ON public.orders USING btree (state, created_at);
CREATE INDEX orders_to_reconcile ON public.orders USING btree (updated_at) WHERE ((reconciled_at IS NULL) AND (provider_session_id IS NOT NULL));
CREATE TRIGGER orders_waitlist_claimed AFTER UPDATE OF state ON public.orders FOR EACH ROW WHEN (((old.state = 'pending'::text) AND (new.state = 'paid'::text) AND (new.checkout_key ~~ 'waitlist-%'::text))) EXECUTE FUNCTION hf_waitlist_claimed();
CREATE TRIGGER orders_webhook_state AFTER UPDATE OF state ON public.orders FOR EACH ROW WHEN (((old.state IS DISTINCT FROM new.state) AND (old.state = ANY (ARRAY['pending'::text, 'settling'::text, 'expired'::text])) AND (new.state = ANY (ARRAY['settling'::text, 'paid'::text, 'expired'::text, 'cancelled'::text])))) EXECUTE FUNCTION hf_webhook_order_state();

-- table orphan_payments (made by 0010_what_was_paid.sql)
create table orphan_payments (
    provider      text not null,
    payment_ref   text not null,
    page_id       text,
    amount_minor  bigint not null,
    currency      text not null,
    status        text not null,
    order_hint    uuid,
    seen_in       text not null,
    first_seen_at timestamp with time zone not null default now(),
    last_seen_at  timestamp with time zone not null default now(),
    constraint orphan_payments_pkey PRIMARY KEY (provider, payment_ref),
    constraint orphan_provider_known CHECK ((provider = ANY (ARRAY['stripe'::text, 'razorpay'::text]))),
    constraint orphan_shape CHECK ((((length(payment_ref) >= 1) AND (length(payment_ref) <= 255)) AND ((length(currency) >= 1) AND (length(currency) <= 10)) AND (length(seen_in) <= 300)))
);
CREATE INDEX orphan_payments_recent ON public.orphan_payments USING btree (last_seen_at DESC);

-- table outbox_jobs (made by 0004_shop.sql; changed by 0010_what_was_paid.sql,
--   0012_after_the_sale.sql, 0060_outgoing_webhooks.sql, 0070_waiting_list.sql, 0090_settling.sql,
--   0122_staff_invites.sql)
create table outbox_jobs (
    id         bigint not null generated always as identity,
    kind       text not null,
    dedupe_key text not null,
    payload    jsonb not null,
    state      text not null default 'pending'::text,
    attempts   integer not null default 0,
    last_error text,
    run_after  timestamp with time zone not null default now(),
    created_at timestamp with time zone not null default now(),
    done_at    timestamp with time zone,
    constraint outbox_jobs_pkey PRIMARY KEY (id),
    constraint outbox_jobs_dedupe_key_key UNIQUE (dedupe_key),
    constraint done_job_has_time CHECK (((state = 'done'::text) = (done_at IS NOT NULL))),
    constraint job_kind_known CHECK ((kind = ANY (ARRAY['staff_invite'::text, 'order_settling'::text, 'waitlist_mail'::text, 'webhook'::text, 'refund'::text, 'order_confirmation'::text, 'expire_session'::text, 'capture_payment'::text, 'refund_notice'::text, 'payment_returned'::text]))),
    constraint job_state_known CHECK ((state = ANY (ARRAY['pending'::text, 'done'::text])))
);
CREATE INDEX outbox_due ON public.outbox_jobs USING btree (run_after) WHERE (state = 'pending'::text);
CREATE INDEX outbox_webhooks_by_endpoint ON public.outbox_jobs USING btree (((payload ->> 'endpoint_id'::text)), id) WHERE (kind = 'webhook'::text);

-- table pay_methods (made by 0104_pay_methods.sql)
create table pay_methods (
    method     text not null,
    provider   text,
    updated_at timestamp with time zone not null default now(),
    constraint pay_methods_pkey PRIMARY KEY (method),
    constraint pay_method_known CHECK ((method = ANY (ARRAY['card'::text, 'upi'::text, 'netbanking'::text, 'sepa_debit'::text]))),
    constraint pay_method_provider_known CHECK ((provider = ANY (ARRAY['razorpay'::text, 'stripe'::text])))
);
CREATE TRIGGER pay_methods_notify_catalogue AFTER INSERT OR DELETE OR UPDATE ON public.pay_methods FOR EACH STATEMENT EXECUTE FUNCTION hf_notify_catalogue();

-- table payment_refs (made by 0001_inventory_schema.sql)
create table payment_refs (
    payment_ref text not null,
    purchase_id uuid not null,
    created_at  timestamp with time zone not null default now(),
    constraint payment_refs_pkey PRIMARY KEY (payment_ref),
    constraint payment_refs_payment_ref_purchase_id_key UNIQUE (payment_ref, purchase_id),
    constraint payment_ref_shape CHECK (((length(payment_ref) >= 1) AND (length(payment_ref) <= 255)))
);

-- table product_kinds (made by 0016_rooms.sql; changed by 0200_items.sql)
create table product_kinds (
    kind       text not null,
    code       text,
    checked_by text,
    constraint product_kinds_pkey PRIMARY KEY (kind),
    constraint product_kind_checked_by_known CHECK ((checked_by = ANY (ARRAY['event'::text, 'day'::text, 'host_stand'::text, 'counter'::text]))),
    constraint product_kind_code_checked CHECK (((code IS NULL) = (checked_by IS NULL))),
    constraint product_kind_code_noun CHECK ((code ~ '^[a-z]{1,20}$'::text))
);

-- table products (made by 0004_shop.sql; changed by 0011_fair_sale.sql, 0016_rooms.sql,
--   0019_staff_run_the_sale.sql, 0070_waiting_list.sql, 0071_drop_queue.sql,
--   0080_kinds_own_their_differences.sql, 0103_images.sql, 0123_drafts.sql)
create table products (
    id                     text not null,
    resource_id            text not null,
    kind                   text not null,
    name                   text not null,
    description            text not null default ''::text,
    price_minor            bigint not null,
    currency               text not null,
    starts_at              timestamp with time zone,
    collection             text not null,
    "position"             integer not null default 0,
    active                 boolean not null default true,
    max_per_order          integer not null default 10,
    sale_opens_at          timestamp with time zone,
    sale_closes_at         timestamp with time zone,
    hidden                 boolean not null default false,
    archived_at            timestamp with time zone,
    waitlist_claim_minutes integer not null default 15,
    waitlist_in_order      boolean not null default false,
    queue_seed             bytea,
    queue_commitment       text,
    queue_drawn_at         timestamp with time zone,
    ends_at                timestamp with time zone,
    image_id               text,
    draft                  boolean not null default false,
    constraint products_pkey PRIMARY KEY (id),
    constraint product_claim_window CHECK (((waitlist_claim_minutes >= 1) AND (waitlist_claim_minutes <= 1440))),
    constraint product_currency_iso CHECK ((currency ~ '^[a-z]{3}$'::text)),
    constraint product_ends_after_start CHECK (((ends_at IS NULL) OR (starts_at IS NULL) OR (ends_at > starts_at))),
    constraint product_id_shape CHECK (((length(id) >= 1) AND (length(id) <= 200))),
    constraint product_max_per_order CHECK (((max_per_order >= 1) AND (max_per_order <= 100))),
    constraint product_price_non_negative CHECK ((price_minor >= 0)),
    constraint product_queue_committed CHECK ((((queue_seed IS NULL) = (queue_commitment IS NULL)) AND ((queue_seed IS NULL) OR ((length(queue_seed) = 32) AND (queue_commitment ~ '^[0-9a-f]{64}$'::text) AND (sale_opens_at IS NOT NULL))))),
    constraint product_queue_drawn_after_commitment CHECK (((queue_drawn_at IS NULL) OR (queue_seed IS NOT NULL))),
    constraint product_sale_window CHECK (((sale_closes_at IS NULL) OR (sale_opens_at IS NULL) OR (sale_opens_at < sale_closes_at))),
    constraint product_collection_known FOREIGN KEY (collection) REFERENCES collections(id) NOT VALID,
    constraint product_kind_known FOREIGN KEY (kind) REFERENCES product_kinds(kind),
    constraint products_image_id_fkey FOREIGN KEY (image_id) REFERENCES images(id),
    constraint products_resource_id_fkey FOREIGN KEY (resource_id) REFERENCES resources(id)
);
CREATE INDEX products_collection ON public.products USING btree (collection, "position", id);
CREATE TRIGGER products_draft_not_on_sale BEFORE INSERT OR UPDATE OF active, draft, collection ON public.products FOR EACH ROW EXECUTE FUNCTION hf_draft_not_on_sale();
CREATE TRIGGER products_notify_catalogue AFTER INSERT OR DELETE OR UPDATE ON public.products FOR EACH STATEMENT EXECUTE FUNCTION hf_notify_catalogue();

-- table rate_buckets (made by 0011_fair_sale.sql)
create unlogged table rate_buckets (
    key          text not null,
    tokens       double precision not null,
    refreshed_at timestamp with time zone not null default now(),
    granted      integer not null default 0,
    constraint rate_buckets_pkey PRIMARY KEY (key),
    constraint bucket_key_shape CHECK (((length(key) >= 1) AND (length(key) <= 128)))
);

-- table redemptions (made by 0012_after_the_sale.sql; changed by 0017_known_outcomes.sql,
--   0100_the_door_admits_its_own.sql, 0200_items.sql)
create table redemptions (
    code        text not null,
    order_id    uuid not null,
    kind        text not null,
    redeemed_at timestamp with time zone not null default clock_timestamp(),
    redeemed_by text not null,
    place       text not null default ''::text,
    attempt     uuid,
    overridden  boolean not null default false,
    item_id     bigint not null,
    constraint redemptions_pkey PRIMARY KEY (item_id),
    constraint redemption_by_shape CHECK (((length(redeemed_by) >= 1) AND (length(redeemed_by) <= 254))),
    constraint redemption_place_shape CHECK ((length(place) <= 100)),
    constraint redemption_kind_known FOREIGN KEY (kind) REFERENCES product_kinds(kind),
    constraint redemptions_item_id_fkey FOREIGN KEY (item_id) REFERENCES order_items(id),
    constraint redemptions_order_id_fkey FOREIGN KEY (order_id) REFERENCES orders(id)
);
CREATE INDEX redemptions_by_code ON public.redemptions USING btree (code);
CREATE INDEX redemptions_by_order ON public.redemptions USING btree (order_id);
CREATE TRIGGER redemptions_append_only BEFORE DELETE OR UPDATE OR TRUNCATE ON public.redemptions FOR EACH STATEMENT EXECUTE FUNCTION redemptions_append_only();
CREATE TRIGGER redemptions_webhook AFTER INSERT ON public.redemptions FOR EACH ROW EXECUTE FUNCTION hf_webhook_code_redeemed();

-- table resources (made by 0001_inventory_schema.sql)
create table resources (
    id            text not null,
    total         integer not null,
    held          integer not null default 0,
    sold          integer not null default 0,
    next_expiry   timestamp with time zone,
    next_deadline timestamp with time zone,
    created_at    timestamp with time zone not null default now(),
    updated_at    timestamp with time zone not null default now(),
    constraint resources_pkey PRIMARY KEY (id),
    constraint held_non_negative CHECK ((held >= 0)),
    constraint no_oversell CHECK (((held + sold) <= total)),
    constraint resource_id_shape CHECK (((length(id) >= 1) AND (length(id) <= 200))),
    constraint sold_non_negative CHECK ((sold >= 0)),
    constraint total_non_negative CHECK ((total >= 0))
);
CREATE TRIGGER resources_notify_stock AFTER INSERT OR UPDATE OF total, held, sold ON public.resources FOR EACH ROW EXECUTE FUNCTION hf_notify_stock();
CREATE TRIGGER resources_webhook_stock AFTER UPDATE OF total, held, sold ON public.resources FOR EACH ROW WHEN (((((old.total - old.held) - old.sold) > 0) <> (((new.total - new.held) - new.sold) > 0))) EXECUTE FUNCTION hf_webhook_stock();

-- table schedules (made by 0019_staff_run_the_sale.sql as pickup_schedules; renamed by
--   0080_kinds_own_their_differences.sql; changed by 0080_kinds_own_their_differences.sql)
create table schedules (
    collection    text not null,
    name          text not null,
    description   text not null default ''::text,
    price_minor   bigint not null,
    currency      text not null,
    capacity      integer not null,
    max_per_order integer not null default 10,
    weekdays      integer[] not null,
    opens         time without time zone not null,
    closes        time without time zone not null,
    slot_minutes  integer not null,
    days_ahead    integer not null,
    closed_days   date[] not null default '{}'::date[],
    archived_at   timestamp with time zone,
    updated_at    timestamp with time zone not null default now(),
    kind          text not null default 'pickup_slot'::text,
    constraint pickup_schedules_pkey PRIMARY KEY (collection),
    constraint schedule_capacity CHECK (((capacity >= 0) AND (capacity <= 1000000))),
    constraint schedule_currency CHECK ((currency ~ '^[a-z]{3}$'::text)),
    constraint schedule_days_ahead CHECK (((days_ahead >= 0) AND (days_ahead <= 366))),
    constraint schedule_hours CHECK ((opens < closes)),
    constraint schedule_max_per_order CHECK (((max_per_order >= 1) AND (max_per_order <= 100))),
    constraint schedule_name CHECK (((length(name) >= 1) AND (length(name) <= 200))),
    constraint schedule_price CHECK ((price_minor >= 0)),
    constraint schedule_slot CHECK (((slot_minutes >= 5) AND (slot_minutes <= 1440))),
    constraint schedule_weekdays CHECK (((weekdays <@ ARRAY[1, 2, 3, 4, 5, 6, 7]) AND (cardinality(weekdays) >= 1))),
    constraint pickup_schedules_collection_fkey FOREIGN KEY (collection) REFERENCES collections(id),
    constraint schedules_kind_fkey FOREIGN KEY (kind) REFERENCES product_kinds(kind)
);
CREATE TRIGGER schedules_notify_catalogue AFTER INSERT OR DELETE OR UPDATE ON public.schedules FOR EACH STATEMENT EXECUTE FUNCTION hf_notify_catalogue();

-- table seat_categories (made by 0180_seating.sql)
create table seat_categories (
    collection  text not null,
    id          text not null,
    name        text not null,
    colour      text not null default '#2f6f4f'::text,
    price_minor bigint not null,
    "position"  integer not null default 0,
    constraint seat_categories_pkey PRIMARY KEY (collection, id),
    constraint seat_category_colour_shape CHECK ((colour ~ '^#[0-9a-f]{6}$'::text)),
    constraint seat_category_id_shape CHECK ((id ~ '^[a-z0-9][a-z0-9-]{0,99}$'::text)),
    constraint seat_category_name_shape CHECK (((length(name) >= 1) AND (length(name) <= 100))),
    constraint seat_category_price CHECK ((price_minor >= 0)),
    constraint seat_categories_collection_fkey FOREIGN KEY (collection) REFERENCES collections(id)
);

-- table seat_pins (made by 0180_seating.sql)
create table seat_pins (
    seat_id    bigint not null,
    hold_id    uuid not null,
    live       boolean not null default true,
    pinned_at  timestamp with time zone not null default now(),
    ended_at   timestamp with time zone,
    end_reason text,
    constraint seat_pins_pkey PRIMARY KEY (hold_id, seat_id),
    constraint seat_pin_end_shape CHECK (((live = (ended_at IS NULL)) AND (live = (end_reason IS NULL)))),
    constraint seat_pins_hold_id_fkey FOREIGN KEY (hold_id) REFERENCES holds(id),
    constraint seat_pins_seat_id_fkey FOREIGN KEY (seat_id) REFERENCES seats(id)
);
CREATE UNIQUE INDEX seat_pins_live ON public.seat_pins USING btree (seat_id) WHERE live;
CREATE TRIGGER seat_pins_guard AFTER INSERT ON public.seat_pins REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION hf_seat_pins_guard();

-- table seat_sections (made by 0180_seating.sql; changed by 0181_seat_chooser.sql)
create table seat_sections (
    product_id  text not null,
    resource_id text not null,
    collection  text not null,
    category    text not null,
    name        text not null,
    "position"  integer not null default 0,
    chooser     text not null default 'best'::text,
    constraint seat_sections_pkey PRIMARY KEY (product_id),
    constraint seat_sections_resource_id_key UNIQUE (resource_id),
    constraint seat_section_chooser_known CHECK ((chooser = ANY (ARRAY['best'::text, 'first_fit'::text]))),
    constraint seat_section_name_shape CHECK (((length(name) >= 1) AND (length(name) <= 100))),
    constraint seat_sections_collection_category_fkey FOREIGN KEY (collection, category) REFERENCES seat_categories(collection, id),
    constraint seat_sections_collection_fkey FOREIGN KEY (collection) REFERENCES collections(id),
    constraint seat_sections_product_id_fkey FOREIGN KEY (product_id) REFERENCES products(id),
    constraint seat_sections_resource_id_fkey FOREIGN KEY (resource_id) REFERENCES resources(id)
);

-- table seating_settings (made by 0180_seating.sql)
create table seating_settings (
    only_row   boolean not null default true,
    splits     boolean not null default true,
    updated_at timestamp with time zone not null default now(),
    constraint seating_settings_pkey PRIMARY KEY (only_row),
    constraint seating_settings_one_row CHECK (only_row)
);

-- table seats (made by 0180_seating.sql)
create table seats (
    id        bigint not null generated always as identity,
    section   text not null,
    label     text not null,
    row_label text not null,
    number    integer not null,
    row_rank  integer not null,
    run       integer not null,
    pos       integer not null,
    x         integer not null,
    y         integer not null,
    access    text not null default 'none'::text,
    state     text not null default 'open'::text,
    note      text not null default ''::text,
    constraint seats_pkey PRIMARY KEY (id),
    constraint seats_section_label_key UNIQUE (section, label),
    constraint seats_section_run_pos_key UNIQUE (section, run, pos),
    constraint seat_access_known CHECK ((access = ANY (ARRAY['none'::text, 'wheelchair'::text, 'companion'::text]))),
    constraint seat_label_shape CHECK ((label ~ '^[A-Za-z0-9][A-Za-z0-9 ._-]{0,23}$'::text)),
    constraint seat_note_shape CHECK ((length(note) <= 200)),
    constraint seat_number_shape CHECK ((((number >= 0) AND (number <= 9999)) AND ((row_rank >= 1) AND (row_rank <= 999)) AND ((pos >= 0) AND (pos <= 9999)))),
    constraint seat_row_shape CHECK ((row_label ~ '^[A-Za-z0-9][A-Za-z0-9 ._-]{0,11}$'::text)),
    constraint seat_state_known CHECK ((state = ANY (ARRAY['open'::text, 'blocked'::text, 'held_back'::text]))),
    constraint seats_section_fkey FOREIGN KEY (section) REFERENCES seat_sections(product_id)
);
CREATE INDEX seats_by_section ON public.seats USING btree (section, row_rank, run, pos);
CREATE TRIGGER seats_keep_pinned BEFORE UPDATE OF state, section ON public.seats FOR EACH ROW WHEN (((new.state <> 'open'::text) OR (new.section <> old.section))) EXECUTE FUNCTION hf_seat_keep_pinned();

-- table settle_windows (made by 0090_settling.sql)
create table settle_windows (
    provider      text not null,
    method        text not null,
    days          integer not null,
    business_days boolean not null,
    source        text not null,
    updated_at    timestamp with time zone not null default now(),
    constraint settle_windows_pkey PRIMARY KEY (provider, method),
    constraint settle_window_days CHECK (((days >= 1) AND (days <= 90))),
    constraint settle_window_method_shape CHECK (((method = '*'::text) OR (method ~ '^[a-z][a-z0-9_]{0,63}$'::text))),
    constraint settle_window_provider_known CHECK ((provider = ANY (ARRAY['razorpay'::text, 'stripe'::text]))),
    constraint settle_window_source_shape CHECK (((length(source) >= 1) AND (length(source) <= 500))),
    constraint settle_window_exceeds_payment_window TRIGGER
);
CREATE CONSTRAINT TRIGGER settle_window_exceeds_payment_window AFTER INSERT OR UPDATE ON public.settle_windows NOT DEFERRABLE INITIALLY IMMEDIATE FOR EACH ROW EXECUTE FUNCTION hf_settle_windows_exceed_payment_window();

-- table staff (made by 0005_staff.sql; changed by 0018_staff_roles.sql,
--   0030_staff_accounts_two_factor.sql)
create table staff (
    id            bigint not null generated always as identity,
    email         text not null,
    password_hash text not null,
    created_at    timestamp with time zone not null default now(),
    updated_at    timestamp with time zone not null default now(),
    role          text not null default 'owner'::text,
    disabled_at   timestamp with time zone,
    constraint staff_pkey PRIMARY KEY (id),
    constraint staff_email_key UNIQUE (email),
    constraint staff_email_shape CHECK (((email = lower(email)) AND ((length(email) >= 3) AND (length(email) <= 254)) AND (email ~~ '_%@_%'::text))),
    constraint staff_hash_argon2id CHECK ((password_hash ~~ '$argon2id$%'::text)),
    constraint staff_role_known CHECK ((role = ANY (ARRAY['owner'::text, 'box_office'::text, 'door'::text])))
);

-- table staff_actions (made by 0005_staff.sql; changed by 0012_after_the_sale.sql,
--   0018_staff_roles.sql, 0030_staff_accounts_two_factor.sql, 0040_exports.sql,
--   0050_catalogue_admin.sql, 0060_outgoing_webhooks.sql, 0061_api_keys.sql, 0070_waiting_list.sql,
--   0072_waitlist_actions.sql, 0103_images.sql, 0120_restoring.sql, 0121_sections_ordered.sql,
--   0122_staff_invites.sql, 0123_drafts.sql, 0185_seat_admin.sql, 0280_sections_added.sql,
--   0300_rooms_saved.sql)
create table staff_actions (
    id       bigint not null generated always as identity,
    staff_id bigint,
    action   text not null,
    target   text not null,
    outcome  text not null,
    detail   jsonb not null default '{}'::jsonb,
    at       timestamp with time zone not null default now(),
    operator text,
    constraint staff_actions_pkey PRIMARY KEY (id),
    constraint staff_action_by_someone CHECK (((staff_id IS NULL) <> (operator IS NULL))),
    constraint staff_action_known CHECK ((action = ANY (ARRAY['save_dining_room'::text, 'seat_section'::text, 'seat_block'::text, 'seat_unblock'::text, 'seat_hold_back'::text, 'seat_release'::text, 'seat_plan'::text, 'seat_section_category'::text, 'seat_category'::text, 'seat_splits'::text, 'publish'::text, 'unpublish'::text, 'invite_staff'::text, 'resend_invite'::text, 'cancel_invite'::text, 'accept_invite'::text, 'move_collection'::text, 'restore_collection'::text, 'restore_product'::text, 'restore_voucher'::text, 'set_image'::text, 'waitlist_rules'::text, 'turn_queue_on'::text, 'remove_waitlist_entry'::text, 'add_api_key'::text, 'revoke_api_key'::text, 'api_refused'::text, 'api_checkout'::text, 'add_voucher'::text, 'archive_voucher'::text, 'add_webhook'::text, 'enable_webhook'::text, 'disable_webhook'::text, 'replay_webhook'::text, 'add_staff'::text, 'archive_collection'::text, 'archive_product'::text, 'archive_voucher'::text, 'change_role'::text, 'change_setting'::text, 'create_voucher'::text, 'disable_staff'::text, 'door_list'::text, 'enable_staff'::text, 'export_attendees'::text, 'export_orders'::text, 'login'::text, 'logout'::text, 'new_recovery_codes'::text, 'redeem'::text, 'refund_order'::text, 'refused'::text, 'release_hold'::text, 'repair_resource'::text, 'reset_two_factor'::text, 'retry_refund'::text, 'save_event'::text, 'save_schedule'::text, 'save_stock'::text, 'save_tier'::text, 'set_capacity'::text, 'set_password'::text, 'two_factor_off'::text, 'two_factor_on'::text]))),
    constraint staff_actions_staff_id_fkey FOREIGN KEY (staff_id) REFERENCES staff(id)
);
CREATE INDEX staff_actions_logins ON public.staff_actions USING btree (staff_id, at DESC) WHERE ((action = 'login'::text) AND (outcome = 'ok'::text));
CREATE INDEX staff_actions_recent ON public.staff_actions USING btree (at DESC);
CREATE TRIGGER staff_actions_append_only BEFORE DELETE OR UPDATE OR TRUNCATE ON public.staff_actions FOR EACH STATEMENT EXECUTE FUNCTION staff_actions_append_only();

-- table staff_invites (made by 0122_staff_invites.sql)
create table staff_invites (
    id           bigint not null generated always as identity,
    email        text not null,
    role         text not null,
    token_sha256 bytea not null,
    invited_by   text not null,
    created_at   timestamp with time zone not null default now(),
    sent_at      timestamp with time zone not null default now(),
    expires_at   timestamp with time zone not null,
    used_at      timestamp with time zone,
    cancelled_at timestamp with time zone,
    constraint staff_invites_pkey PRIMARY KEY (id),
    constraint staff_invite_token_unique UNIQUE (token_sha256),
    constraint staff_invite_email_shape CHECK (((email = lower(email)) AND ((length(email) >= 3) AND (length(email) <= 254)) AND (email ~~ '_%@_%'::text))),
    constraint staff_invite_expires_after_sent CHECK ((expires_at > sent_at)),
    constraint staff_invite_role_known CHECK ((role = ANY (ARRAY['owner'::text, 'box_office'::text, 'door'::text]))),
    constraint staff_invite_token_sha256 CHECK ((length(token_sha256) = 32)),
    constraint staff_invite_used_or_cancelled CHECK (((used_at IS NULL) OR (cancelled_at IS NULL)))
);
CREATE UNIQUE INDEX staff_invites_one_open ON public.staff_invites USING btree (email) WHERE ((used_at IS NULL) AND (cancelled_at IS NULL));

-- table staff_login_challenges (made by 0030_staff_accounts_two_factor.sql)
create table staff_login_challenges (
    id_hash     bytea not null,
    staff_id    bigint not null,
    typed_email text not null,
    csrf_token  text not null,
    wrong_codes integer not null default 0,
    expires_at  timestamp with time zone not null,
    constraint staff_login_challenges_pkey PRIMARY KEY (id_hash),
    constraint challenge_csrf_shape CHECK ((length(csrf_token) >= 32)),
    constraint challenge_id_hash_shape CHECK ((length(id_hash) = 32)),
    constraint challenge_wrong_codes_non_negative CHECK ((wrong_codes >= 0)),
    constraint staff_login_challenges_staff_id_fkey FOREIGN KEY (staff_id) REFERENCES staff(id)
);
CREATE INDEX staff_login_challenges_expiry ON public.staff_login_challenges USING btree (expires_at);

-- table staff_recovery_codes (made by 0030_staff_accounts_two_factor.sql)
create table staff_recovery_codes (
    staff_id   bigint not null,
    code_hash  bytea not null,
    used_at    timestamp with time zone,
    created_at timestamp with time zone not null default now(),
    constraint staff_recovery_codes_pkey PRIMARY KEY (staff_id, code_hash),
    constraint recovery_code_hash_shape CHECK ((length(code_hash) = 32)),
    constraint staff_recovery_codes_staff_id_fkey FOREIGN KEY (staff_id) REFERENCES staff(id)
);

-- table staff_sessions (made by 0005_staff.sql)
create table staff_sessions (
    id_hash    bytea not null,
    staff_id   bigint not null,
    csrf_token text not null,
    created_at timestamp with time zone not null default now(),
    expires_at timestamp with time zone not null,
    constraint staff_sessions_pkey PRIMARY KEY (id_hash),
    constraint session_csrf_shape CHECK ((length(csrf_token) >= 32)),
    constraint session_id_hash_shape CHECK ((length(id_hash) = 32)),
    constraint staff_sessions_staff_id_fkey FOREIGN KEY (staff_id) REFERENCES staff(id) ON DELETE CASCADE
);
CREATE INDEX staff_sessions_expiry ON public.staff_sessions USING btree (expires_at);

-- table staff_settings (made by 0030_staff_accounts_two_factor.sql)
create table staff_settings (
    only_row               boolean not null default true,
    two_factor_for_refunds boolean not null default false,
    updated_at             timestamp with time zone not null default now(),
    constraint staff_settings_pkey PRIMARY KEY (only_row),
    constraint staff_settings_one_row CHECK (only_row)
);

-- table staff_two_factor (made by 0030_staff_accounts_two_factor.sql)
create table staff_two_factor (
    staff_id      bigint not null,
    secret_sealed bytea not null,
    confirmed_at  timestamp with time zone,
    last_step     bigint,
    created_at    timestamp with time zone not null default now(),
    constraint staff_two_factor_pkey PRIMARY KEY (staff_id),
    constraint two_factor_sealed_shape CHECK ((length(secret_sealed) = ((12 + 20) + 16))),
    constraint two_factor_step_after_confirming CHECK (((confirmed_at IS NULL) OR (last_step IS NOT NULL))),
    constraint staff_two_factor_staff_id_fkey FOREIGN KEY (staff_id) REFERENCES staff(id)
);

-- table storefront (made by 0101_the_shop_is_the_owners.sql; changed by 0103_images.sql,
--   0270_shop_zone.sql)
create table storefront (
    only_row      boolean not null default true,
    name          text not null default 'Shop'::text,
    description   text not null default ''::text,
    accent        text not null default '#0b6e4f'::text,
    contact_email text not null default ''::text,
    terms_url     text not null default ''::text,
    privacy_url   text not null default ''::text,
    imprint_url   text not null default ''::text,
    updated_at    timestamp with time zone not null default now(),
    logo_id       text,
    time_zone     text not null default ''::text,
    constraint storefront_pkey PRIMARY KEY (only_row),
    constraint storefront_accent_shape CHECK ((accent ~ '^#[0-9a-f]{6}$'::text)),
    constraint storefront_links_shape CHECK ((((terms_url = ''::text) OR ((terms_url ~ '^https?://[^[:space:]]+$'::text) AND (length(terms_url) <= 500))) AND ((privacy_url = ''::text) OR ((privacy_url ~ '^https?://[^[:space:]]+$'::text) AND (length(privacy_url) <= 500))) AND ((imprint_url = ''::text) OR ((imprint_url ~ '^https?://[^[:space:]]+$'::text) AND (length(imprint_url) <= 500))))),
    constraint storefront_name_shape CHECK (((length(name) >= 1) AND (length(name) <= 100))),
    constraint storefront_one_row CHECK (only_row),
    constraint storefront_words_shape CHECK (((length(description) <= 300) AND (length(contact_email) <= 254))),
    constraint storefront_zone_shape CHECK (((time_zone = ''::text) OR (time_zone ~ '^[A-Za-z][A-Za-z0-9_+/-]{1,63}$'::text))),
    constraint storefront_logo_id_fkey FOREIGN KEY (logo_id) REFERENCES images(id)
);
CREATE TRIGGER storefront_notify_catalogue AFTER INSERT OR DELETE OR UPDATE ON public.storefront FOR EACH STATEMENT EXECUTE FUNCTION hf_notify_catalogue();

-- table table_pins (made by 0160_tables.sql; changed by 0260_walk_ins.sql)
create table table_pins (
    hold_id  uuid,
    room     text not null,
    table_id text not null,
    during   tstzrange not null,
    live     boolean not null default true,
    walk_in  uuid,
    constraint no_table_booked_twice EXCLUDE USING gist (room WITH =, table_id WITH =, during WITH &&) WHERE (live),
    constraint pin_is_a_hold_or_a_walk_in CHECK ((num_nonnulls(hold_id, walk_in) = 1)),
    constraint pin_is_a_stay CHECK (((NOT isempty(during)) AND lower_inc(during) AND (NOT upper_inc(during)) AND (NOT lower_inf(during)) AND (NOT upper_inf(during)))),
    constraint table_pins_hold_id_fkey FOREIGN KEY (hold_id) REFERENCES holds(id),
    constraint table_pins_room_table_id_fkey FOREIGN KEY (room, table_id) REFERENCES dining_tables(room, id),
    constraint table_pins_walk_in_fkey FOREIGN KEY (walk_in) REFERENCES walk_ins(id)
);
CREATE UNIQUE INDEX table_pins_hold_table ON public.table_pins USING btree (hold_id, table_id);
CREATE UNIQUE INDEX table_pins_walk_in_table ON public.table_pins USING btree (walk_in, table_id);

-- table vouchers (made by 0019_staff_run_the_sale.sql)
create table vouchers (
    code             text not null,
    resource_id      text not null,
    percent_off      integer,
    amount_off_minor bigint,
    per_unit         boolean not null default false,
    currency         text,
    products         text[],
    unlocks          text[] not null default '{}'::text[],
    valid_from       timestamp with time zone,
    valid_until      timestamp with time zone,
    per_buyer        boolean not null default false,
    created_by       text not null,
    created_at       timestamp with time zone not null default now(),
    archived_at      timestamp with time zone,
    constraint vouchers_pkey PRIMARY KEY (code),
    constraint vouchers_resource_id_key UNIQUE (resource_id),
    constraint voucher_amount CHECK (((amount_off_minor > 0) AND (currency ~ '^[a-z]{3}$'::text))),
    constraint voucher_amount_currency CHECK (((amount_off_minor IS NULL) = (currency IS NULL))),
    constraint voucher_code_shape CHECK ((code ~ '^[A-Z0-9][A-Z0-9-]{2,39}$'::text)),
    constraint voucher_does_something CHECK (((percent_off IS NOT NULL) OR (amount_off_minor IS NOT NULL) OR (cardinality(unlocks) > 0))),
    constraint voucher_one_discount CHECK (((percent_off IS NULL) OR (amount_off_minor IS NULL))),
    constraint voucher_per_unit CHECK (((NOT per_unit) OR (amount_off_minor IS NOT NULL))),
    constraint voucher_percent CHECK (((percent_off >= 1) AND (percent_off <= 100))),
    constraint voucher_resource_shape CHECK ((resource_id = ('voucher:'::text || code))),
    constraint voucher_window CHECK (((valid_until IS NULL) OR (valid_from IS NULL) OR (valid_from < valid_until))),
    constraint vouchers_resource_id_fkey FOREIGN KEY (resource_id) REFERENCES resources(id)
);

-- table waitlist_entries (made by 0070_waiting_list.sql; changed by 0071_drop_queue.sql,
--   0073_waitlist_line_rules.sql)
create table waitlist_entries (
    id               uuid not null default gen_random_uuid(),
    product_id       text not null,
    token            text not null,
    name             text not null,
    email            text not null,
    email_key        text not null,
    qty              integer not null,
    provider         text not null,
    state            text not null default 'unconfirmed'::text,
    line_no          bigint,
    created_at       timestamp with time zone not null default now(),
    confirmed_at     timestamp with time zone,
    offered_at       timestamp with time zone,
    offer_expires_at timestamp with time zone,
    order_id         uuid,
    ended_at         timestamp with time zone,
    ended_by         text,
    client_address   text,
    constraint waitlist_entries_pkey PRIMARY KEY (id),
    constraint waitlist_entries_token_key UNIQUE (token),
    constraint waitlist_client_address_shape CHECK ((length(client_address) <= 64)),
    constraint waitlist_counted_when_confirmed CHECK ((((state <> ALL (ARRAY['waiting'::text, 'offered'::text, 'claimed'::text, 'lapsed'::text])) OR (line_no IS NOT NULL)) AND ((state <> ALL (ARRAY['unconfirmed'::text, 'queued'::text])) OR (line_no IS NULL)))),
    constraint waitlist_customer_shape CHECK ((((length(name) >= 1) AND (length(name) <= 200)) AND ((length(email) >= 3) AND (length(email) <= 254)) AND ((length(email_key) >= 3) AND (length(email_key) <= 254)))),
    constraint waitlist_ended_says_who CHECK (((state = ANY (ARRAY['lapsed'::text, 'removed'::text])) = ((ended_at IS NOT NULL) AND (ended_by IS NOT NULL)))),
    constraint waitlist_offer_has_order CHECK (((state <> ALL (ARRAY['offered'::text, 'claimed'::text])) OR ((order_id IS NOT NULL) AND (offered_at IS NOT NULL)))),
    constraint waitlist_qty CHECK (((qty >= 1) AND (qty <= 100))),
    constraint waitlist_state_known CHECK ((state = ANY (ARRAY['unconfirmed'::text, 'queued'::text, 'waiting'::text, 'offered'::text, 'claimed'::text, 'lapsed'::text, 'removed'::text]))),
    constraint waitlist_token_shape CHECK ((token ~ '^[0-9a-f]{64}$'::text)),
    constraint waitlist_entries_order_id_fkey FOREIGN KEY (order_id) REFERENCES orders(id),
    constraint waitlist_entries_product_id_fkey FOREIGN KEY (product_id) REFERENCES products(id)
);
CREATE INDEX waitlist_by_order ON public.waitlist_entries USING btree (order_id) WHERE (order_id IS NOT NULL);
CREATE INDEX waitlist_by_product ON public.waitlist_entries USING btree (product_id, created_at);
CREATE INDEX waitlist_in_line ON public.waitlist_entries USING btree (product_id, line_no) WHERE (state = 'waiting'::text);
CREATE UNIQUE INDEX waitlist_line_per_product ON public.waitlist_entries USING btree (product_id, line_no);
CREATE INDEX waitlist_live_by_address ON public.waitlist_entries USING btree (product_id, client_address) WHERE ((state = ANY (ARRAY['unconfirmed'::text, 'queued'::text, 'waiting'::text, 'offered'::text])) AND (client_address IS NOT NULL));
CREATE UNIQUE INDEX waitlist_one_per_email ON public.waitlist_entries USING btree (product_id, email_key) WHERE (state = ANY (ARRAY['unconfirmed'::text, 'queued'::text, 'waiting'::text, 'offered'::text]));
CREATE INDEX waitlist_queued ON public.waitlist_entries USING btree (product_id) WHERE (state = 'queued'::text);

-- table walk_ins (made by 0260_walk_ins.sql)
create table walk_ins (
    id        uuid not null default hf_uuid_v7(),
    room      text not null,
    party     integer not null,
    name      text not null default ''::text,
    tables    text[] not null,
    seated_at timestamp with time zone not null,
    until     timestamp with time zone not null,
    left_at   timestamp with time zone,
    seated_by text not null,
    constraint walk_ins_pkey PRIMARY KEY (id),
    constraint walk_in_left_after CHECK (((left_at IS NULL) OR (left_at >= seated_at))),
    constraint walk_in_name_shape CHECK ((length(name) <= 200)),
    constraint walk_in_party CHECK (((party >= 1) AND (party <= 100))),
    constraint walk_in_says_who CHECK (((length(seated_by) >= 1) AND (length(seated_by) <= 254))),
    constraint walk_in_stay CHECK ((until > seated_at)),
    constraint walk_in_tables CHECK ((cardinality(tables) >= 1)),
    constraint walk_ins_room_fkey FOREIGN KEY (room) REFERENCES dining_rooms(collection)
);
CREATE INDEX walk_ins_by_room_day ON public.walk_ins USING btree (room, seated_at);

-- table webhook_attempts (made by 0060_outgoing_webhooks.sql)
create table webhook_attempts (
    id          bigint not null generated always as identity,
    job_id      bigint not null,
    endpoint_id text not null,
    message_id  text not null,
    at          timestamp with time zone not null default now(),
    status      integer,
    error       text,
    duration_ms integer not null,
    constraint webhook_attempts_pkey PRIMARY KEY (id),
    constraint webhook_attempt_said_something CHECK (((status IS NOT NULL) OR (error IS NOT NULL))),
    constraint webhook_attempts_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints(id),
    constraint webhook_attempts_job_id_fkey FOREIGN KEY (job_id) REFERENCES outbox_jobs(id),
    constraint webhook_attempts_message_id_fkey FOREIGN KEY (message_id) REFERENCES webhook_messages(id)
);
CREATE INDEX webhook_attempts_by_endpoint ON public.webhook_attempts USING btree (endpoint_id, id DESC);
CREATE INDEX webhook_attempts_by_job ON public.webhook_attempts USING btree (job_id, id);

-- table webhook_endpoints (made by 0060_outgoing_webhooks.sql)
create table webhook_endpoints (
    id              text not null,
    url             text not null,
    events          text[] not null,
    secret_sealed   bytea not null,
    allow_private   boolean not null default false,
    created_by      text not null,
    created_at      timestamp with time zone not null default now(),
    disabled_at     timestamp with time zone,
    disabled_reason text,
    constraint webhook_endpoints_pkey PRIMARY KEY (id),
    constraint webhook_endpoint_disabled_why CHECK (((disabled_at IS NULL) = (disabled_reason IS NULL))),
    constraint webhook_endpoint_events CHECK (((cardinality(events) >= 1) AND (cardinality(events) <= 20))),
    constraint webhook_endpoint_id_shape CHECK ((id ~ '^ep_[a-z0-9]{20,40}$'::text)),
    constraint webhook_endpoint_sealed_shape CHECK ((length(secret_sealed) = ((12 + 32) + 16))),
    constraint webhook_endpoint_url_shape CHECK (((url ~ '^https?://'::text) AND (length(url) <= 2000)))
);

-- table webhook_events (made by 0004_shop.sql)
create table webhook_events (
    provider    text not null,
    event_id    text not null,
    event_type  text not null,
    received_at timestamp with time zone not null default now(),
    constraint webhook_events_pkey PRIMARY KEY (provider, event_id)
);

-- table webhook_messages (made by 0060_outgoing_webhooks.sql)
create table webhook_messages (
    id         text not null,
    event_type text not null,
    payload    jsonb not null,
    created_at timestamp with time zone not null default now(),
    constraint webhook_messages_pkey PRIMARY KEY (id)
);
CREATE INDEX webhook_messages_recent ON public.webhook_messages USING btree (created_at);

-- sequence waitlist_line (made by 0070_waiting_list.sql)
create sequence waitlist_line as bigint;
