-- A table drop (issue 45): a room's bookings open at a set moment, and
-- memory answers the crowd from the room's tables and stays.
--
-- 1. `dining_rooms.bookings_open_at`: every time of the room that starts
--    after it opens for booking at that moment (its product's
--    `sale_opens_at`), the times published later too; until then the
--    crowd is told "not on sale yet" from memory. Null: times open as
--    they are published.
-- 2. A change to a room's set-up (tables, joins, periods, turns, the room)
--    notifies `hf_catalogue`, so every process's memory of the room (what
--    says whether a free table seats a party) is read again within
--    milliseconds, as the catalogue is.

alter table dining_rooms add column bookings_open_at timestamptz;

create trigger dining_rooms_notify_catalogue
    after insert or delete or update on dining_rooms
    for each statement execute function hf_notify_catalogue();
create trigger dining_tables_notify_catalogue
    after insert or delete or update on dining_tables
    for each statement execute function hf_notify_catalogue();
create trigger dining_joins_notify_catalogue
    after insert or delete or update on dining_joins
    for each statement execute function hf_notify_catalogue();
create trigger dining_periods_notify_catalogue
    after insert or delete or update on dining_periods
    for each statement execute function hf_notify_catalogue();
create trigger dining_turns_notify_catalogue
    after insert or delete or update on dining_turns
    for each statement execute function hf_notify_catalogue();
