-- The shop's time zone on Settings (issue 46): an owner chooses the zone
-- every page and mail shows times in and typed times are read in, an
-- IANA name (checked against the IANA database by the application, which
-- stores its canonical spelling). Empty: the zone the server was started
-- with (`HOLDFAST_TIME_ZONE`, UTC without it). The storefront row already
-- notifies memory when it changes (0220), so every process shows the new
-- zone within milliseconds of the save.

alter table storefront add column time_zone text not null default ''
    constraint storefront_zone_shape
        check (time_zone = '' or time_zone ~ '^[A-Za-z][A-Za-z0-9_+/-]{1,63}$');
