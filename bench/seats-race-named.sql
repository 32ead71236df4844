-- The named race of bench/seats-db: every shopper names two seats of the
-- same 20 (row R1 of section named:run), picked at random, through
-- hf_start_checkouts; pgbench runs it once per client, all at once.
\set p random(1, 19)
select status from seatbench.checkout('named' || :run, 2, 'R1-' || :p || ',R1-' || (:p + 1));
