//! The shop's time zone (`HOLDFAST_TIME_ZONE`, an IANA name): every time a
//! shopper or staff member reads is shown in it, with its abbreviation, and
//! the catalogue's slot times are read in it. Daylight-saving changes come
//! from the IANA database (`chrono-tz`), never from a fixed offset.

use chrono::{
    DateTime, FixedOffset, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc,
};
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
    /// Any case: "europe/berlin" is Europe/Berlin.
    pub fn parse(name: &str) -> Result<Self, String> {
        let name = name.trim();
        name.parse::<Tz>()
            .ok()
            .or_else(|| {
                chrono_tz::TZ_VARIANTS
                    .iter()
                    .find(|tz| tz.name().eq_ignore_ascii_case(name))
                    .copied()
            })
            .map(Self)
            .ok_or_else(|| format!("{name:?} is not an IANA time zone name like Europe/Berlin"))
    }

    /// Every zone name of the IANA database, as the Settings page offers
    /// them.
    pub fn names() -> impl Iterator<Item = &'static str> {
        chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name())
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

impl ShopZone {
    /// A moment as staff type it: a date and time read in this zone
    /// (`2027-03-20 19:30`, or with a `T`), or with an explicit offset
    /// (`2027-03-20T19:30+01:00`, `2027-03-20T18:30:00Z`). A wall-clock time
    /// the clocks skip is refused, as [`ShopZone::at`] refuses it.
    pub fn read(&self, typed: &str) -> Result<DateTime<Utc>, String> {
        let text = typed.trim();
        let refused = || {
            format!(
                "{:?} is not a date and time like 2027-03-20 19:30 (in {}) or \
                 2027-03-20T19:30+01:00",
                text.chars().take(60).collect::<String>(),
                self.name()
            )
        };
        if text.is_empty() || text.len() > 40 {
            return Err(refused());
        }
        if let Ok(at) = DateTime::<FixedOffset>::parse_from_rfc3339(text) {
            return Ok(at.with_timezone(&Utc));
        }
        for format in [
            "%Y-%m-%dT%H:%M%:z",
            "%Y-%m-%d %H:%M%:z",
            "%Y-%m-%d %H:%M:%S%:z",
        ] {
            if let Ok(at) = DateTime::<FixedOffset>::parse_from_str(text, format) {
                return Ok(at.with_timezone(&Utc));
            }
        }
        for format in [
            "%Y-%m-%dT%H:%M",
            "%Y-%m-%d %H:%M",
            "%Y-%m-%dT%H:%M:%S",
            "%Y-%m-%d %H:%M:%S",
        ] {
            if let Ok(local) = NaiveDateTime::parse_from_str(text, format) {
                return self.at(local.date(), local.time());
            }
        }
        Err(refused())
    }

    /// How [`ShopZone::read`] reads a moment back into a form:
    /// `2027-03-20 19:30` in this zone.
    pub fn typed(&self, at: DateTime<Utc>) -> String {
        self.local(at).format("%Y-%m-%d %H:%M").to_string()
    }

    /// A moment as a date and time picker (`<input type="datetime-local">`)
    /// shows it and sends it back: `2027-03-20T19:30` in this zone, which
    /// [`ShopZone::read`] reads.
    pub fn picker(&self, at: DateTime<Utc>) -> String {
        self.local(at).format("%Y-%m-%dT%H:%M").to_string()
    }

    /// A moment's wall-clock time as a time picker (`<input type="time">`)
    /// shows it: `19:30` in this zone.
    pub fn clock_time(&self, at: DateTime<Utc>) -> String {
        self.local(at).format("%H:%M").to_string()
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
    fn a_picker_shows_a_moment_in_the_shops_time_and_reads_it_back_across_the_clock_changes() {
        let berlin = ShopZone::parse("Europe/Berlin").unwrap();
        for (local, utc) in [
            ("2027-03-28T01:59", "2027-03-28T00:59:00+00:00"),
            ("2027-03-28T03:00", "2027-03-28T01:00:00+00:00"),
            ("2027-10-31T01:30", "2027-10-30T23:30:00+00:00"),
            ("2027-10-31T03:30", "2027-10-31T02:30:00+00:00"),
        ] {
            let at = berlin.read(local).unwrap();
            assert_eq!(at.to_rfc3339(), utc, "{local}");
            assert_eq!(berlin.picker(at), local);
        }
        // the hour the clocks skip is refused; the hour they repeat is
        // read as its first (summer) time and shown as typed
        assert!(
            berlin
                .read("2027-03-28T02:30")
                .unwrap_err()
                .contains("the clocks skip it")
        );
        let twice = berlin.read("2027-10-31T02:30").unwrap();
        assert_eq!(twice.to_rfc3339(), "2027-10-31T00:30:00+00:00");
        assert_eq!(berlin.picker(twice), "2027-10-31T02:30");
        assert_eq!(berlin.clock_time(twice), "02:30");
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

    #[test]
    fn staff_type_moments_in_the_zone_or_with_an_offset() {
        let berlin = ShopZone::parse("Europe/Berlin").unwrap();
        let winter = "2027-03-20T18:30:00+00:00";
        for typed in [
            "2027-03-20 19:30",
            " 2027-03-20T19:30 ",
            "2027-03-20 19:30:00",
            "2027-03-20T19:30+01:00",
            "2027-03-20T18:30:00Z",
            "2027-03-20 20:30+02:00",
        ] {
            assert_eq!(berlin.read(typed).unwrap().to_rfc3339(), winter, "{typed}");
        }
        assert_eq!(
            berlin.typed(berlin.read(winter).unwrap()),
            "2027-03-20 19:30"
        );
        for bad in [
            "",
            "tomorrow",
            "2027-02-30 19:30",
            "2027-03-20",
            "19:30",
            "2027-03-28 02:30",
        ] {
            assert!(berlin.read(bad).is_err(), "{bad:?}");
        }
        assert!(
            berlin
                .read("2027-03-28 02:30")
                .unwrap_err()
                .contains("skip")
        );
    }
}
