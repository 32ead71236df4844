-- The churn of bench/seats-db: one random step on section churn:run
-- (bench/seats-fixture.sql's seatbench.churn); pgbench runs it from many
-- clients for a while.
select seatbench.churn('churn' || :run);
