//! A form as staff typed it, read field by field into what the domain
//! takes, and what was wrong with it: a page that refuses a form shows it
//! again with the values kept and each error beside its field (tied to it
//! with `aria-describedby`), and a summary above.

use chrono::{DateTime, NaiveDate, NaiveTime, Utc};

use crate::clock::ShopZone;

/// A refusal from the domain ("the URL must start with https://; nothing
/// was changed") in a form's words: a sentence, saying that nothing was
/// changed.
pub(crate) fn refusal(message: &str) -> String {
    let mut chars = message.trim().chars();
    let said: String = match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    };
    let said = said
        .trim_end_matches('.')
        .trim_end_matches("; nothing was changed")
        .trim_end_matches('.');
    format!("{said}. Nothing was changed.")
}

#[derive(Debug, Default, Clone)]
pub(crate) struct Form {
    values: Vec<(String, String)>,
    /// (field, message); an empty field is the form's as a whole.
    errors: Vec<(String, String)>,
}

impl Form {
    pub(crate) fn typed(values: Vec<(String, String)>) -> Self {
        Self {
            values,
            errors: Vec::new(),
        }
    }

    /// A field's value as typed ("" when the form did not send it).
    pub(crate) fn value(&self, name: &str) -> &str {
        self.values
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str())
    }

    /// Every value sent under a name (ticked boxes, a multiple select).
    pub(crate) fn all(&self, name: &str) -> Vec<&str> {
        self.values
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// Whether a box of this name and value is ticked (or an option chosen).
    pub(crate) fn has(&self, name: &str, value: &str) -> bool {
        self.values.iter().any(|(n, v)| n == name && v == value)
    }

    /// Whether a checkbox was ticked.
    pub(crate) fn ticked(&self, name: &str) -> bool {
        self.values.iter().any(|(n, _)| n == name)
    }

    /// Fill a field in (a page showing what is stored).
    pub(crate) fn set(&mut self, name: &str, value: impl Into<String>) {
        let value = value.into();
        match self.values.iter_mut().find(|(n, _)| n == name) {
            Some(field) => field.1 = value,
            None => self.values.push((name.to_owned(), value)),
        }
    }

    /// A list's lines, each a form of its own: the fields named in `names`
    /// in the order sent, a new line at each `start` (a line's boxes ticked
    /// or not, so each line sends `start` once, first).
    pub(crate) fn lines(&self, start: &str, names: &[&str]) -> Vec<Form> {
        let mut lines: Vec<Form> = Vec::new();
        for (name, value) in &self.values {
            if name == start {
                lines.push(Form::default());
            }
            if let Some(line) = lines.last_mut().filter(|_| names.contains(&name.as_str())) {
                line.values.push((name.clone(), value.clone()));
            }
        }
        lines
    }

    /// How many values it holds.
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    /// How many values were sent under any of these names.
    pub(crate) fn all_of(&self, names: &[&str]) -> usize {
        self.values
            .iter()
            .filter(|(n, _)| names.contains(&n.as_str()))
            .count()
    }

    /// Forget every value of these fields (a list typed again whole).
    pub(crate) fn clear_all(&mut self, names: &[&str]) {
        self.values.retain(|(n, _)| !names.contains(&n.as_str()));
    }

    /// Tick a box, choose an option.
    pub(crate) fn add(&mut self, name: &str, value: impl Into<String>) {
        self.values.push((name.to_owned(), value.into()));
    }

    pub(crate) fn error(&self, name: &str) -> Option<&str> {
        self.errors
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, m)| m.as_str())
    }

    pub(crate) fn invalid(&self, name: &str) -> bool {
        self.error(name).is_some()
    }

    pub(crate) fn errors(&self) -> &[(String, String)] {
        &self.errors
    }

    /// A field's error (the first one a field gets is the one shown).
    pub(crate) fn fail(&mut self, name: &str, message: impl Into<String>) {
        if !self.invalid(name) || name.is_empty() {
            self.errors.push((name.to_owned(), message.into()));
        }
    }

    pub(crate) fn ok(&self) -> bool {
        self.errors.is_empty()
    }

    /// The ids a field's `aria-describedby` names: its hint, if it has
    /// one, and its error, if it has one.
    pub(crate) fn described(&self, name: &str, hint: &str) -> String {
        let mut ids = Vec::new();
        if !hint.is_empty() {
            ids.push(format!("f-{name}-hint"));
        }
        if self.invalid(name) {
            ids.push(format!("f-{name}-error"));
        }
        ids.join(" ")
    }

    /// Text of at most `max` characters, trimmed; `required` refuses it
    /// empty.
    pub(crate) fn text(&mut self, name: &str, label: &str, max: usize, required: bool) -> String {
        let value = self.value(name).trim().to_owned();
        if required && value.is_empty() {
            self.fail(name, format!("{label} is needed"));
        } else if value.chars().count() > max {
            self.fail(
                name,
                format!(
                    "{label} is at most {max} characters (this is {})",
                    value.chars().count()
                ),
            );
        }
        value
    }

    /// A whole number from `min` to `max`.
    pub(crate) fn whole(&mut self, name: &str, label: &str, min: i64, max: i64) -> Option<i64> {
        let typed = self.value(name).trim().replace(['_', ' '], "");
        if typed.is_empty() {
            self.fail(name, format!("{label} is needed: a whole number"));
            return None;
        }
        match typed.parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => Some(n),
            Ok(_) => {
                self.fail(name, format!("{label} is {min} to {max}"));
                None
            }
            Err(_) => {
                self.fail(
                    name,
                    format!("{label} must be a whole number from {min} to {max}"),
                );
                None
            }
        }
    }

    /// An amount of money, in major units (`35.50`): its minor units.
    pub(crate) fn money(&mut self, name: &str, label: &str) -> Option<i64> {
        match crate::money::parse(self.value(name)) {
            Ok(minor) if minor <= 100_000_000 => Some(minor),
            Ok(_) => {
                self.fail(name, format!("{label} is at most 1,000,000.00"));
                None
            }
            Err(message) => {
                self.fail(name, format!("{label}: {message}"));
                None
            }
        }
    }

    /// A moment, in the shop's zone or with an explicit offset; empty is
    /// `None`, and refused when `required`.
    pub(crate) fn moment(
        &mut self,
        name: &str,
        label: &str,
        zone: ShopZone,
        required: bool,
    ) -> Option<DateTime<Utc>> {
        let typed = self.value(name).trim().to_owned();
        if typed.is_empty() {
            if required {
                self.fail(
                    name,
                    format!("{label} is needed: a date and time like 2027-03-20 19:30"),
                );
            }
            return None;
        }
        match zone.read(&typed) {
            Ok(at) => Some(at),
            Err(message) => {
                self.fail(name, format!("{label}: {message}"));
                None
            }
        }
    }

    /// A wall-clock time (`08:00`).
    pub(crate) fn time(&mut self, name: &str, label: &str) -> Option<NaiveTime> {
        let typed = self.value(name).trim().to_owned();
        match NaiveTime::parse_from_str(&typed, "%H:%M")
            .or_else(|_| NaiveTime::parse_from_str(&typed, "%H:%M:%S"))
        {
            Ok(time) => Some(time),
            Err(_) => {
                self.fail(
                    name,
                    format!(
                        "{label} is a time like 08:00, not {:?}",
                        typed.chars().take(20).collect::<String>()
                    ),
                );
                None
            }
        }
    }

    /// Dates (`2026-12-25`), separated by spaces, commas or lines.
    pub(crate) fn dates(&mut self, name: &str, label: &str) -> Vec<NaiveDate> {
        let typed = self.value(name).to_owned();
        let mut dates = Vec::new();
        for word in typed
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|w| !w.is_empty())
        {
            match NaiveDate::parse_from_str(word, "%Y-%m-%d") {
                Ok(date) if !dates.contains(&date) => dates.push(date),
                Ok(_) => {}
                Err(_) => {
                    self.fail(
                        name,
                        format!(
                            "{label}: {:?} is not a date like 2026-12-25",
                            word.chars().take(20).collect::<String>()
                        ),
                    );
                    return Vec::new();
                }
            }
        }
        if dates.len() > 400 {
            self.fail(name, format!("{label}: at most 400 days"));
        }
        dates.sort();
        dates
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(fields: &[(&str, &str)]) -> Form {
        Form::typed(
            fields
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn each_field_says_what_is_wrong_with_it() {
        let mut f = form(&[
            ("title", "  "),
            ("capacity", "lots"),
            ("price", "-3"),
            ("when", "soon"),
        ]);
        assert_eq!(f.text("title", "The title", 200, true), "");
        assert_eq!(f.whole("capacity", "Capacity", 0, 10), None);
        assert_eq!(f.money("price", "The price"), None);
        assert_eq!(f.moment("when", "The date", ShopZone::UTC, true), None);
        assert_eq!(f.errors().len(), 4);
        assert!(f.error("capacity").unwrap().contains("whole number"));
        assert!(f.error("price").unwrap().contains("zero or more"));
        assert_eq!(
            f.described("capacity", "hint"),
            "f-capacity-hint f-capacity-error"
        );
        let mut g = form(&[
            ("title", "Harbour Lights"),
            ("days", "2026-12-25, 2026-12-26"),
        ]);
        assert_eq!(g.text("title", "The title", 200, true), "Harbour Lights");
        assert_eq!(g.dates("days", "Closed days").len(), 2);
        assert!(g.ok());
        assert_eq!(g.described("title", ""), "");
    }
}
