-- Emptied: the naive read-then-write baseline that benchmarks race against
-- is made by the tool in the database it measures (crates/tools/src/naive.rs),
-- never by `migrate` (0016 drops it where an earlier 0003 made it). A
-- database that applied the old text has its checksum brought up to date by
-- `holdfast migrate` (src/database/mod.rs, `migrate`).
select 1;
