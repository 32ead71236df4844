-- The read-then-write baseline that `holdfast bench --naive` races against
-- the engine. It is here to be measured, never used: the application reads
-- `taken`, decides in Rust, and writes `taken` back. There is deliberately no
-- CHECK constraint, so what it oversells is recorded instead of refused.
create table naive_resources (
    id     text primary key,
    total  integer not null,
    taken  integer not null default 0
);

create table naive_holds (
    id          bigint generated always as identity primary key,
    resource_id text not null references naive_resources (id),
    account_id  text not null,
    qty         integer not null,
    created_at  timestamptz not null default now()
);
create index naive_holds_resource on naive_holds (resource_id);
