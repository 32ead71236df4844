-- One image per event (or schedule, or shelf) and per product, and the
-- shop's logo (issue 33), kept with the catalogue (src/images.rs).

-- An image as staff uploaded it: its type checked by its bytes, its size
-- and dimensions bounded, named by its content (the first 32 hex digits
-- of its SHA-256), so its address never has to change and browsers may
-- keep it for good.
create table images (
    id            text not null primary key,
    content_type  text not null,
    width         integer not null,
    height        integer not null,
    bytes         bytea not null,
    created_at    timestamptz not null default now(),
    constraint image_id_shape check (id ~ '^[0-9a-f]{32}$'),
    constraint image_type_known check (content_type in ('image/jpeg', 'image/png')),
    constraint image_size check (width between 1 and 6000 and height between 1 and 6000
                                 and length(bytes) between 1 and 5242880)
);

-- What the pages show of an image: the same picture at a few widths (never
-- wider than the original), made when it is uploaded.
create table image_variants (
    image_id      text not null references images (id),
    width         integer not null,
    content_type  text not null,
    bytes         bytea not null,
    primary key (image_id, width),
    constraint image_variant_type check (content_type in ('image/jpeg', 'image/png')),
    constraint image_variant_width check (width between 1 and 6000)
);

alter table collections add column image_id text references images (id);
alter table products add column image_id text references images (id);
alter table storefront add column logo_id text references images (id);

-- The pages answer from memory: a collection's new image says so, as a
-- change to the products does.
create trigger collections_image_notify_catalogue after update of image_id on collections
    for each statement execute function hf_notify_catalogue();

-- Putting an image up (or taking it down) is recorded in Activity.
do $$
declare
    v_def text;
begin
    select pg_get_constraintdef(oid) into v_def
      from pg_constraint where conname = 'staff_action_known' and conrelid = 'staff_actions'::regclass;
    execute 'alter table staff_actions drop constraint staff_action_known';
    execute 'alter table staff_actions add constraint staff_action_known '
            || replace(v_def, 'ARRAY[', 'ARRAY[''set_image''::text, ');
end;
$$;
