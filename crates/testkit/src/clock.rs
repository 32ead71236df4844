//! The shop's time zone in tests: Berlin, and the nights its clocks change.

use chrono::{Duration, NaiveDate, NaiveTime, Utc};
use holdfast::clock::ShopZone;

/// Europe/Berlin, a zone whose clocks change twice a year.
pub fn berlin() -> ShopZone {
    ShopZone::parse("Europe/Berlin").unwrap()
}

/// The next day (from tomorrow) whose 02:30 the clocks skip, or pass twice.
pub fn next_change(zone: ShopZone, skipped: bool) -> (NaiveDate, i64) {
    let today = zone.today(Utc::now());
    let half_two = NaiveTime::from_hms_opt(2, 30, 0).unwrap();
    let one = NaiveTime::from_hms_opt(1, 0, 0).unwrap();
    let four = NaiveTime::from_hms_opt(4, 0, 0).unwrap();
    for ahead in 1..400 {
        let day = today + Duration::days(ahead);
        let span = zone.at(day, four).unwrap() - zone.at(day, one).unwrap();
        let found = if skipped {
            zone.at(day, half_two).is_err()
        } else {
            span == Duration::hours(4)
        };
        if found {
            return (day, ahead);
        }
    }
    panic!("no clock change within 400 days");
}
