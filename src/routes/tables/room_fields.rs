//! A dining room's set-up read from its page's fields (`super::setup`):
//! each list's lines in the order sent ([`Form::lines`]), checked as the
//! room's tables in the database are (names, parties, quarter-hour turns,
//! a service's name), duplicates refused naming both lines, each error
//! said beside its list with the line's number as the page shows it.

use chrono::NaiveTime;

use crate::catalogue::tables::{JoinSpec, PeriodSpec, RoomSpec, TableSpec, TurnSpec};
use crate::routes::admin::form::Form;

pub(super) const TABLE: [&str; 6] = [
    "table_id",
    "table_min",
    "table_max",
    "table_area",
    "table_offered",
    "table_out",
];
pub(super) const JOIN: [&str; 5] = [
    "join_tables",
    "join_min",
    "join_max",
    "join_offered",
    "join_out",
];
pub(super) const PERIOD: [&str; 8] = [
    "period_name",
    "period_day",
    "period_opens",
    "period_last",
    "period_deposit",
    "period_deposit_from",
    "period_cancel_hours",
    "period_out",
];
pub(super) const TURN: [&str; 3] = ["turn_up_to", "turn_minutes", "turn_out"];

/// A line of a list as the page shows it: its fields by name.
pub(super) struct Line {
    form: Form,
}

impl Line {
    pub(super) fn value(&self, name: &str) -> &str {
        self.form.value(name)
    }

    pub(super) fn has(&self, name: &str, value: &i32) -> bool {
        self.form.has(name, &value.to_string())
    }

    pub(super) fn out(&self, name: &str) -> bool {
        self.form.ticked(name)
    }

    /// Nothing typed: a spare line (its choices and boxes aside, which
    /// always send something or nothing).
    pub(super) fn blank(&self, names: &[&str]) -> bool {
        names
            .iter()
            .filter(|n| !n.ends_with("_out") && !n.ends_with("_offered") && !n.ends_with("_day"))
            .all(|n| self.form.value(n).trim().is_empty())
    }

    pub(super) fn of(pairs: Vec<(&str, String)>) -> Self {
        let mut form = Form::default();
        for (name, value) in pairs {
            form.add(name, value);
        }
        Line { form }
    }
}

/// The lines of a list as sent, blank ones and those ticked out too.
pub(super) fn typed_lines(form: &Form, names: &[&str]) -> Vec<Line> {
    form.lines(names[0], names)
        .into_iter()
        .map(|form| Line { form })
        .collect()
}

/// A whole number of a line, or what is wrong, naming the line.
fn whole(line: &Line, name: &str, what: &str, min: i64, max: i64) -> Result<i32, String> {
    let typed = line.value(name).trim();
    typed
        .parse::<i64>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .map(|n| n as i32)
        .ok_or_else(|| format!("{what} is a whole number from {min} to {max}"))
}

/// A list's lines read, blank ones and those ticked out left aside; the
/// first that is wrong said beside the list (`key`), naming its line as
/// the page numbers it. `same` says what makes two lines the same thing
/// (a table's name): a second is refused, naming both.
fn each<T>(
    form: &mut Form,
    key: &str,
    what: &str,
    names: &[&str],
    read: impl Fn(&Line) -> Result<T, String>,
    same: impl Fn(&T) -> String,
) -> Vec<T> {
    let out = names[names.len() - 1];
    let lines = match whole_lines(form, names) {
        Ok(lines) => lines,
        Err(e) => {
            form.fail(key, e);
            return Vec::new();
        }
    };
    let mut read_lines: Vec<(usize, T)> = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        if line.blank(names) || line.out(out) {
            continue;
        }
        let thing = read(line).and_then(|thing| {
            match read_lines.iter().find(|(_, t)| same(t) == same(&thing)) {
                Some((first, _)) => Err(format!(
                    "{} is line {} too: give each once",
                    same(&thing),
                    first + 1
                )),
                None => Ok(thing),
            }
        });
        match thing {
            Ok(thing) => read_lines.push((n, thing)),
            Err(e) => {
                form.fail(key, format!("{what} line {}: {e}", n + 1));
                break;
            }
        }
    }
    read_lines.into_iter().map(|(_, t)| t).collect()
}

/// A list's lines as sent, refused when they do not arrive as the page
/// sends them: each line's first field first, none of its fields twice
/// (a weekday box aside), nothing before the first line.
fn whole_lines(form: &Form, names: &[&str]) -> Result<Vec<Line>, String> {
    let lines = typed_lines(form, names);
    let sent = form.all_of(names);
    let kept: usize = lines.iter().map(|l| l.form.len()).sum();
    let doubled = lines.iter().any(|l| {
        names
            .iter()
            .filter(|n| !n.ends_with("_day"))
            .any(|n| l.form.all(n).len() > 1)
    });
    if sent != kept || doubled {
        return Err("The list's fields did not arrive whole: load the page again".into());
    }
    Ok(lines)
}

/// A table's or a joined set's name as the room keeps it: letters and
/// digits first, then also spaces, dots, hyphens and underscores.
fn name_shape(name: &str, most: usize) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || " ._-".contains(c))
        && name.chars().count() <= most
}

fn table_of(line: &Line) -> Result<TableSpec, String> {
    let id = line.value("table_id").trim().to_owned();
    if !name_shape(&id, 40) {
        return Err(format!(
            "{:?}: a table's name is a letter or digit first, then letters, digits, spaces, \
             dots or hyphens, at most 40",
            id.chars().take(40).collect::<String>()
        ));
    }
    let table = TableSpec {
        min_party: whole(line, "table_min", "the fewest guests", 1, 100)?,
        max_party: whole(line, "table_max", "the most guests", 1, 100)?,
        area: line.value("table_area").trim().chars().take(100).collect(),
        priority: whole(line, "table_offered", "the order offered", 0, 10_000)?,
        id,
    };
    if table.min_party > table.max_party {
        return Err(format!(
            "table {}: the fewest guests is more than the most",
            table.id
        ));
    }
    Ok(table)
}

fn join_of(line: &Line) -> Result<JoinSpec, String> {
    let joined: Vec<String> = line
        .value("join_tables")
        .split(['+', ','])
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    if !(2..=8).contains(&joined.len()) {
        return Err("name 2 to 8 tables, like W1 + W2".to_owned());
    }
    let join = JoinSpec {
        id: joined.join("+"),
        tables: joined,
        min_party: whole(line, "join_min", "the fewest guests", 1, 100)?,
        max_party: whole(line, "join_max", "the most guests", 1, 100)?,
        priority: whole(line, "join_offered", "the order offered", 0, 10_000)?,
    };
    if join.min_party > join.max_party || !name_shape(&join.id.replace('+', " "), 80) {
        return Err(format!(
            "{}: the fewest guests is at most the most, the names at most 80 characters",
            join.tables.join(" + ")
        ));
    }
    Ok(join)
}

fn period_of(line: &Line) -> Result<PeriodSpec, String> {
    // kept as the room's word for it: "Dinner" is dinner, "Late lunch"
    // late-lunch
    let name = line
        .value("period_name")
        .trim()
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join("-");
    let mut chars = name.chars();
    let shaped = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.len() <= 40;
    if !shaped {
        return Err(format!(
            "{:?}: a service is named in letters (digits and hyphens after), at most 40, \
             like dinner",
            name.chars().take(40).collect::<String>()
        ));
    }
    let weekdays: Vec<i32> = line
        .form
        .all("period_day")
        .iter()
        .filter_map(|d| d.parse::<i32>().ok())
        .filter(|d| (1..=7).contains(d))
        .collect();
    if weekdays.is_empty() {
        return Err(format!("{name}: tick the days it is served"));
    }
    let time = |field: &str, what: &str| {
        NaiveTime::parse_from_str(line.value(field).trim(), "%H:%M")
            .map_err(|_| format!("{name}: {what} is a time like 18:00"))
    };
    let deposit = match line.value("period_deposit").trim() {
        "" => 0,
        typed => crate::money::parse(typed)
            .ok()
            .filter(|m| *m <= 100_000_000)
            .ok_or_else(|| format!("{name}: the deposit is an amount like 10.00"))?,
    };
    Ok(PeriodSpec {
        weekdays,
        opens: time("period_opens", "its first time")?,
        last_seating: time("period_last", "its last seating")?,
        deposit_minor: deposit,
        deposit_from_party: whole_or(line, "period_deposit_from", "a deposit's party", 1, 100, 1)
            .map_err(|e| format!("{name}: {e}"))?,
        cancel_hours: whole_or(
            line,
            "period_cancel_hours",
            "the hours to cancel",
            0,
            720,
            24,
        )
        .map_err(|e| format!("{name}: {e}"))?,
        name,
    })
}

/// [`whole`], or `default` when left empty.
fn whole_or(
    line: &Line,
    name: &str,
    what: &str,
    min: i64,
    max: i64,
    default: i32,
) -> Result<i32, String> {
    if line.value(name).trim().is_empty() {
        return Ok(default);
    }
    whole(line, name, what, min, max)
}

/// The room the fields describe, or each list's error set on the form.
pub(super) fn read(
    form: &mut Form,
    id: String,
    currency: String,
    zone: crate::clock::ShopZone,
) -> Option<RoomSpec> {
    let name = form.text("name", "The room's name", 200, true);
    let description = form.text("description", "The description", 1000, false);
    let interval = form.whole("interval", "The interval", 15, 60);
    let pacing = form.whole("pacing", "Guests starting in a quarter hour", 1, 1000);
    let days_ahead = form.whole("days_ahead", "Days ahead", 0, 365);
    let book_until = form.whole("book_until", "Minutes before", 0, 10_080);
    let largest = form.whole("largest_party", "The largest party", 1, 100);
    let least_fill = form.whole("least_fill", "The share a party fills", 0, 100);
    let opens_at = form.moment("opens_at", "Bookings open", zone, false);
    let tables = each(form, "tables", "Table", &TABLE, table_of, |t| {
        format!("table {}", t.id)
    });
    let joins = each(form, "joins", "Joined tables", &JOIN, join_of, |j| {
        j.tables.join(" + ")
    });
    let periods = each(form, "periods", "Service", &PERIOD, period_of, |p| {
        p.name.clone()
    });
    let mut turns = each(
        form,
        "turns",
        "Party size",
        &TURN,
        |line| {
            let minutes = whole(line, "turn_minutes", "the minutes", 15, 720)?;
            if minutes % 15 != 0 {
                return Err("the minutes are quarter hours: 90, 105, 120".to_owned());
            }
            Ok(TurnSpec {
                up_to_party: whole(line, "turn_up_to", "the party's size", 1, 100)?,
                minutes,
            })
        },
        |t| format!("parties up to {}", t.up_to_party),
    );
    turns.sort_by_key(|t| t.up_to_party);
    let mut closed_days = Vec::new();
    for typed in form.all("closed_day").into_iter().map(str::trim) {
        match chrono::NaiveDate::parse_from_str(typed, "%Y-%m-%d") {
            _ if typed.is_empty() => {}
            Ok(day) if !closed_days.contains(&day) => closed_days.push(day),
            Ok(_) => {}
            Err(_) => {
                let said = format!(
                    "A closed day is a date like 2026-12-25, not {:?}",
                    typed.chars().take(20).collect::<String>()
                );
                form.fail("closed", said);
                break;
            }
        }
    }
    closed_days.sort();
    if closed_days.len() > 400 {
        form.fail("closed", "At most 400 closed days");
    }
    if !form.ok() {
        return None;
    }
    let room = RoomSpec {
        id,
        name,
        description,
        currency,
        interval_minutes: interval? as i32,
        pacing: pacing? as i32,
        days_ahead: days_ahead? as i32,
        book_until_minutes: book_until? as i32,
        largest_party: largest? as i32,
        least_fill: least_fill? as i32,
        tables,
        joins,
        periods,
        turns,
        closed_days,
        bookings_open_at: opens_at,
    };
    match room.check() {
        Ok(()) => Some(room),
        Err(e) => {
            form.fail("", crate::routes::admin::form::refusal(&e));
            None
        }
    }
}
