//! The shop's time zone (`HOLDFAST_TIME_ZONE`, an IANA name): every time a
//! shopper or staff member reads is shown in it, with its abbreviation, and
//! the catalogue's slot times are read in it. Daylight-saving changes come
//! from the IANA database (`chrono-tz`), never from a fixed offset.

use chrono::{DateTime, LocalResult, NaiveDate, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShopZone(Tz);

impl Default for ShopZone {
    fn default() -> Self {
        Self::UTC
    }
}

impl ShopZone {
    pub const UTC: ShopZone = ShopZone(Tz::UTC);

    /// An IANA name: `Europe/Berlin`, `Asia/Kolkata`, `UTC`.
    pub fn parse(name: &str) -> Result<Self, String> {
        name.trim()
            .parse::<Tz>()
            .map(Self)
            .map_err(|_| format!("{name:?} is not an IANA time zone name like Europe/Berlin"))
    }

    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    pub fn local(&self, at: DateTime<Utc>) -> DateTime<Tz> {
        at.with_timezone(&self.0)
    }

    /// "Sunday 28 March, 03:30 CEST": when an event or a slot is.
    pub fn long(&self, at: DateTime<Utc>) -> String {
        self.local(at).format("%A %-d %B, %H:%M %Z").to_string()
    }

    /// "Sun 28 Mar 03:30 CEST": a slot in a product's name.
    pub fn short(&self, at: DateTime<Utc>) -> String {
        self.local(at).format("%a %-d %b %H:%M %Z").to_string()
    }

    /// "2026-12-01 19:02:03 CET": a moment in a record.
    pub fn stamp(&self, at: DateTime<Utc>) -> String {
        self.local(at).format("%Y-%m-%d %H:%M:%S %Z").to_string()
    }

    /// "2026-12-01 19:02 CET"
    pub fn minute(&self, at: DateTime<Utc>) -> String {
        self.local(at).format("%Y-%m-%d %H:%M %Z").to_string()
    }

    /// "19:02 CET"
    pub fn time(&self, at: DateTime<Utc>) -> String {
        self.local(at).format("%H:%M %Z").to_string()
    }

    /// Today's date here.
    pub fn today(&self, now: DateTime<Utc>) -> NaiveDate {
        self.local(now).date_naive()
    }

    /// A wall-clock time on a day here, as an instant. A time the clocks
    /// skip (spring forward) does not exist and is refused; a time they
    /// pass twice (fall back) is its first passing.
    pub fn at(&self, date: NaiveDate, time: NaiveTime) -> Result<DateTime<Utc>, String> {
        match self.0.from_local_datetime(&date.and_time(time)) {
            LocalResult::Single(at) => Ok(at.with_timezone(&Utc)),
            LocalResult::Ambiguous(first, _) => Ok(first.with_timezone(&Utc)),
            LocalResult::None => Err(format!(
                "{} {} does not exist in {}: the clocks skip it",
                date,
                time.format("%H:%M"),
                self.name()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).unwrap()
    }

    fn hm(h: u32, m: u32) -> NaiveTime {
        NaiveTime::from_hms_opt(h, m, 0).unwrap()
    }

    #[test]
    fn berlin_changes_its_clocks_on_the_right_nights() {
        let berlin = ShopZone::parse("Europe/Berlin").unwrap();
        // spring forward, 28 March 2027: 02:00 → 03:00
        let before = berlin.at(day(2027, 3, 28), hm(1, 30)).unwrap();
        let after = berlin.at(day(2027, 3, 28), hm(3, 30)).unwrap();
        assert_eq!(before.to_rfc3339(), "2027-03-28T00:30:00+00:00");
        assert_eq!(after.to_rfc3339(), "2027-03-28T01:30:00+00:00");
        assert_eq!(berlin.time(before), "01:30 CET");
        assert_eq!(berlin.time(after), "03:30 CEST");
        assert!(berlin.at(day(2027, 3, 28), hm(2, 30)).is_err());
        // fall back, 31 October 2027: 02:30 happens twice; the first
        let twice = berlin.at(day(2027, 10, 31), hm(2, 30)).unwrap();
        assert_eq!(twice.to_rfc3339(), "2027-10-31T00:30:00+00:00");
        assert_eq!(berlin.time(twice), "02:30 CEST");
        assert_eq!(berlin.long(after), "Sunday 28 March, 03:30 CEST");
    }

    #[test]
    fn names_are_iana_names() {
        assert_eq!(
            ShopZone::parse(" Asia/Kolkata ").unwrap().name(),
            "Asia/Kolkata"
        );
        assert_eq!(ShopZone::parse("UTC").unwrap(), ShopZone::UTC);
        for bad in ["", "CET+1", "Mars/Olympus", "Europe/Berlin; drop table"] {
            assert!(ShopZone::parse(bad).is_err(), "{bad:?}");
        }
    }
}
