-- One shopper of bench/seats-db's race: the best :qty seats together in
-- section race:run, through hf_start_checkouts
-- (bench/seats-fixture.sql's seatbench.checkout); pgbench runs it once per
-- client, all at once.
select status from seatbench.checkout('race' || :run, :qty, null);
