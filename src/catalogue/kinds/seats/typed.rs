//! A section's plan as staff fill it in on the admin's page: a line of
//! fields a row — its name, first and last seat, the seats an aisle
//! follows, wheelchair places and companion seats (numbers written
//! "7" or "1, 14") — ranked in the order given, from the stage back.
//! Read here with words that name the row and the field, before the
//! database makes the seats (`hf_seat_plan`); and the plan as it stands,
//! written back into the same fields.

use std::collections::HashSet;

use serde_json::Value;

use super::plan::RowSpec;

/// The most seats a section's plan filled in on the admin may have.
pub const MAX_TYPED_SEATS: i64 = 5000;

/// One row of the plan's fields, as typed (or as stored, written back).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowFields {
    pub row: String,
    pub first: String,
    pub last: String,
    pub aisles: String,
    pub wheelchair: String,
    pub companion: String,
}

impl RowFields {
    /// Nothing typed in any of its fields: a spare line, left out.
    pub fn is_blank(&self) -> bool {
        [
            &self.row,
            &self.first,
            &self.last,
            &self.aisles,
            &self.wheelchair,
            &self.companion,
        ]
        .iter()
        .all(|f| f.trim().is_empty())
    }

    /// The row in the compact form, or what is wrong with it.
    pub fn spec(&self) -> Result<RowSpec, String> {
        let row = self.row.trim().to_owned();
        if row.is_empty() {
            return Err("give the row a name, like A".into());
        }
        let seat = |typed: &str, what: &str| -> Result<i32, String> {
            typed
                .trim()
                .parse::<i32>()
                .ok()
                .filter(|n| (0..=9999).contains(n))
                .ok_or_else(|| format!("row {row}: the {what} seat is a number from 0 to 9999"))
        };
        let numbers = |typed: &str, what: &str| -> Result<Vec<i32>, String> {
            typed
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|n| !n.is_empty())
                .map(|n| n.parse::<i32>().ok().filter(|n| (0..=9999).contains(n)))
                .collect::<Option<Vec<i32>>>()
                .ok_or_else(|| format!("row {row}: {what} are seat numbers, like 1, 14"))
        };
        let spec = RowSpec {
            seats: [seat(&self.first, "first")?, seat(&self.last, "last")?],
            aisles_after: numbers(&self.aisles, "the seats an aisle follows")?,
            wheelchair: numbers(&self.wheelchair, "wheelchair places")?,
            companion: numbers(&self.companion, "companion seats")?,
            row,
        };
        // said in the page's words before the file's check says it in its own
        let [first, last] = spec.seats;
        if last < first || last - first >= 1000 {
            return Err(format!(
                "row {}: the first seat comes before the last, at most 1,000 seats a row",
                spec.row
            ));
        }
        for (what, list) in [
            ("an aisle after", &spec.aisles_after),
            ("a wheelchair place at", &spec.wheelchair),
            ("a companion seat at", &spec.companion),
        ] {
            if let Some(n) = list.iter().find(|n| !(first..=last).contains(*n)) {
                return Err(format!(
                    "row {}: {what} seat {n}, but the row's seats are {first} to {last}",
                    spec.row
                ));
            }
        }
        spec.check().map(|()| spec)
    }

    /// A row of the compact form in the fields' words.
    pub fn of(spec: &RowSpec) -> Self {
        let words = |numbers: &[i32]| {
            numbers
                .iter()
                .map(i32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        Self {
            row: spec.row.clone(),
            first: spec.seats[0].to_string(),
            last: spec.seats[1].to_string(),
            aisles: words(&spec.aisles_after),
            wheelchair: words(&spec.wheelchair),
            companion: words(&spec.companion),
        }
    }
}

/// The rows filled in, checked together: their compact forms in the
/// order given (spare lines left out), or what is wrong, in words that
/// name the row.
pub fn row_specs(rows: &[RowFields]) -> Result<Vec<RowSpec>, String> {
    let mut specs = Vec::new();
    let mut labels = HashSet::new();
    let mut seats = 0_i64;
    for (position, typed) in rows.iter().enumerate() {
        if typed.is_blank() {
            continue;
        }
        let spec = typed
            .spec()
            .map_err(|e| format!("Line {}: {e}", position + 1))?;
        if !labels.insert(spec.row.clone()) {
            return Err(format!(
                "Line {}: row {} is given twice",
                position + 1,
                spec.row
            ));
        }
        seats += i64::from(spec.seats[1] - spec.seats[0] + 1);
        specs.push(spec);
    }
    if !(1..=999).contains(&specs.len()) {
        return Err("A plan has 1 to 999 rows: fill in at least one".into());
    }
    if seats > MAX_TYPED_SEATS {
        return Err(format!(
            "A section has at most {MAX_TYPED_SEATS} seats; this plan has {seats}"
        ));
    }
    Ok(specs)
}

/// The rows filled in, as `hf_seat_plan` takes them (ranked in the order
/// given, rank 1 nearest the stage), or what is wrong.
pub fn fielded_rows(rows: &[RowFields]) -> Result<Value, String> {
    let specs = row_specs(rows)?;
    Ok(Value::Array(
        specs
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                serde_json::json!({
                    "row": spec.row, "rank": i + 1, "seats": spec.seats,
                    "aisles_after": spec.aisles_after, "wheelchair": spec.wheelchair,
                    "companion": spec.companion,
                })
            })
            .collect(),
    ))
}

/// A seat of the plan as it stands, for writing the plan back.
pub struct PlacedSeat<'a> {
    pub row_label: &'a str,
    pub number: i32,
    pub row_rank: i32,
    pub run: i32,
    pub access: &'a str,
}

/// The plan as it stands, a row's compact form each, from its seats in
/// order (rank, run, position; seats off the plan left out).
pub fn placed_rows(seats: &[PlacedSeat<'_>]) -> Vec<RowSpec> {
    let mut rows: Vec<(i32, RowSpec)> = Vec::new();
    let mut last_run = None;
    for seat in seats {
        let same_row = rows
            .last()
            .is_some_and(|(rank, r)| r.row == seat.row_label && *rank == seat.row_rank);
        if !same_row {
            rows.push((
                seat.row_rank,
                RowSpec {
                    row: seat.row_label.to_owned(),
                    seats: [seat.number, seat.number],
                    aisles_after: Vec::new(),
                    wheelchair: Vec::new(),
                    companion: Vec::new(),
                },
            ));
            last_run = None;
        }
        let (_, row) = rows.last_mut().expect("pushed");
        if last_run.is_some_and(|run| run != seat.run) {
            row.aisles_after.push(row.seats[1]);
        }
        last_run = Some(seat.run);
        row.seats[1] = seat.number;
        match seat.access {
            "wheelchair" => row.wheelchair.push(seat.number),
            "companion" => row.companion.push(seat.number),
            _ => {}
        }
    }
    rows.into_iter().map(|(_, row)| row).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(row: &str, first: &str, last: &str, aisles: &str) -> RowFields {
        RowFields {
            row: row.into(),
            first: first.into(),
            last: last.into(),
            aisles: aisles.into(),
            ..RowFields::default()
        }
    }

    #[test]
    fn rows_filled_in_are_read_and_written_back_alike() {
        let typed = [
            RowFields {
                wheelchair: "1".into(),
                ..line("C", "1", " 6", "3")
            },
            RowFields::default(),
            line("D", "2", "4", ""),
        ];
        let rows = fielded_rows(&typed).unwrap();
        assert_eq!(rows[0]["rank"], 1);
        assert_eq!(rows[1]["rank"], 2, "a spare line takes no rank");
        let seats: Vec<PlacedSeat> = (1..=6)
            .map(|n| PlacedSeat {
                row_label: "C",
                number: n,
                row_rank: 3,
                run: if n <= 3 { 3000 } else { 3001 },
                access: if n == 1 { "wheelchair" } else { "none" },
            })
            .collect();
        let back: Vec<RowFields> = placed_rows(&seats).iter().map(RowFields::of).collect();
        assert_eq!(
            back,
            [RowFields {
                wheelchair: "1".into(),
                ..line("C", "1", "6", "3")
            }]
        );
        assert_eq!(fielded_rows(&back).unwrap()[0], rows[0]);
    }

    #[test]
    fn a_wrong_plan_is_said_in_words_that_name_the_line() {
        let cases = [
            (
                vec![line("A", "1", "4", ""), line("A", "1", "4", "")],
                "Line 2: row A is given twice",
            ),
            (
                vec![line("A", "4", "1", "")],
                "Line 1: row A: the first seat comes before the last",
            ),
            (
                vec![line("A", "one", "4", "")],
                "Line 1: row A: the first seat is a number",
            ),
            (vec![line("", "1", "4", "")], "Line 1: give the row a name"),
            (
                vec![line("A", "1", "4", "9")],
                "Line 1: row A: an aisle after seat 9, but the row's seats are 1 to 4",
            ),
            (
                vec![line("A", "1", "4", "2 and 3")],
                "Line 1: row A: the seats an aisle follows are seat numbers",
            ),
            (
                ["A", "B", "C", "D", "E", "F"]
                    .iter()
                    .map(|r| line(r, "1", "999", ""))
                    .collect(),
                "at most 5000 seats",
            ),
            (vec![RowFields::default()], "fill in at least one"),
        ];
        for (typed, words) in cases {
            let said = fielded_rows(&typed).unwrap_err();
            assert!(said.contains(words), "{typed:?}: {said}");
        }
    }
}
