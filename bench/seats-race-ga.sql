-- The yardstick of bench/seats-db's race: one shopper asking for :qty units
-- of the general-admission tier ga:run (as many units as the section has
-- seats), through hf_start_checkouts; pgbench runs it once per client.
select seatbench.ga_checkout('ga' || :run, :qty);
