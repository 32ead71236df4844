//! A section's plan as staff type it in the admin: rows in the compact
//! form, one JSON object a line (or one JSON array of them), each
//! `{"row": "C", "rank": 3, "seats": [1, 24], "aisles_after": [12],
//! "wheelchair": [1], "companion": [2]}` (`rank` may be left out: the
//! rows are then ranked in the order typed, from the stage back). Read
//! here with words that say which line is wrong and how, before the
//! database makes the seats (`hf_seat_plan`); and the plan as it stands,
//! written back in the same form for the page's field.

use std::collections::HashSet;

use serde_json::Value;

use super::plan::RowSpec;

/// The most seats a section's plan typed in the admin may have.
pub const MAX_TYPED_SEATS: i64 = 5000;

/// What a row may say.
const PARTS: [&str; 6] = [
    "row",
    "rank",
    "seats",
    "aisles_after",
    "wheelchair",
    "companion",
];

/// The rows typed, as `hf_seat_plan` takes them, or what is wrong, in
/// words that name the line.
pub fn typed_rows(text: &str) -> Result<Value, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(
            "Type the plan's rows, one a line, like {\"row\": \"A\", \"seats\": [1, 12]}".into(),
        );
    }
    let lines: Vec<(usize, Value)> = if text.starts_with('[') {
        match serde_json::from_str::<Vec<Value>>(text) {
            Ok(rows) => rows
                .into_iter()
                .enumerate()
                .map(|(i, r)| (i + 1, r))
                .collect(),
            Err(_) => {
                return Err(
                    "The plan starts with [ but is not a list of rows: close it with ] \
                            and put a comma between rows"
                        .into(),
                );
            }
        }
    } else {
        let mut rows = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim().trim_end_matches(',');
            if line.is_empty() {
                continue;
            }
            match serde_json::from_str::<Value>(line) {
                Ok(row) => rows.push((i + 1, row)),
                Err(_) => {
                    return Err(format!(
                        "Line {}: not a row. A row is written like {{\"row\": \"A\", \"seats\": \
                         [1, 12]}}, with double quotes",
                        i + 1
                    ));
                }
            }
        }
        rows
    };
    if !(1..=999).contains(&lines.len()) {
        return Err("A plan has 1 to 999 rows".into());
    }
    let mut rows = Vec::new();
    let mut labels = HashSet::new();
    let mut ranks = HashSet::new();
    let mut seats = 0_i64;
    for (position, (line, value)) in lines.iter().enumerate() {
        let (spec, rank) = row_of(value).map_err(|e| format!("Line {line}: {e}"))?;
        spec.check().map_err(|e| format!("Line {line}: {e}"))?;
        let rank = rank.unwrap_or(position as i64 + 1);
        if !labels.insert(spec.row.clone()) {
            return Err(format!("Line {line}: row {} is given twice", spec.row));
        }
        if !ranks.insert(rank) {
            return Err(format!(
                "Line {line}: rank {rank} is given twice (rank 1 is the row nearest the stage)"
            ));
        }
        seats += i64::from(spec.seats[1] - spec.seats[0] + 1);
        rows.push(serde_json::json!({
            "row": spec.row, "rank": rank, "seats": spec.seats,
            "aisles_after": spec.aisles_after, "wheelchair": spec.wheelchair,
            "companion": spec.companion,
        }));
    }
    if seats > MAX_TYPED_SEATS {
        return Err(format!(
            "A section has at most {MAX_TYPED_SEATS} seats; this plan has {seats}"
        ));
    }
    Ok(Value::Array(rows))
}

/// One typed row: its compact form, and its rank if it gives one.
fn row_of(value: &Value) -> Result<(RowSpec, Option<i64>), String> {
    let Some(row) = value.as_object() else {
        return Err("a row is written in braces, like {\"row\": \"A\", \"seats\": [1, 12]}".into());
    };
    if let Some(part) = row.keys().find(|k| !PARTS.contains(&k.as_str())) {
        return Err(format!(
            "{:?} is not part of a row (a row has row, rank, seats, aisles_after, wheelchair \
             and companion)",
            part.chars().take(30).collect::<String>()
        ));
    }
    let label = match row.get("row") {
        Some(Value::String(label)) => label.clone(),
        _ => return Err("a row needs its name in quotes, like \"row\": \"A\"".into()),
    };
    let rank = match row.get("rank") {
        None => None,
        Some(rank) => match rank.as_i64() {
            Some(rank) if (1..=999).contains(&rank) => Some(rank),
            _ => {
                return Err(format!(
                    "row {label}: its rank is a whole number from 1 (nearest the stage) to 999"
                ));
            }
        },
    };
    let numbers = |part: &str| -> Result<Vec<i32>, String> {
        match row.get(part) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|n| {
                    n.as_i64()
                        .and_then(|n| i32::try_from(n).ok())
                        .filter(|n| (0..=9999).contains(n))
                })
                .collect::<Option<Vec<i32>>>()
                .ok_or_else(|| format!("row {label}: {part} lists seat numbers, like [1, 12]")),
            Some(_) => Err(format!(
                "row {label}: {part} lists seat numbers, like [1, 12]"
            )),
        }
    };
    let seats = numbers("seats")?;
    let [first, last] = seats[..] else {
        return Err(format!(
            "row {label}: seats are its first and last seat numbers, like \"seats\": [1, 12]"
        ));
    };
    let (aisles_after, wheelchair, companion) = (
        numbers("aisles_after")?,
        numbers("wheelchair")?,
        numbers("companion")?,
    );
    Ok((
        RowSpec {
            row: label,
            seats: [first, last],
            aisles_after,
            wheelchair,
            companion,
        },
        rank,
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

/// A row as the page writes it back (its parts in the order staff type
/// them).
#[derive(serde::Serialize)]
struct CompactRow<'a> {
    row: &'a str,
    rank: i32,
    seats: [i32; 2],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    aisles_after: Vec<i32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    wheelchair: Vec<i32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    companion: Vec<i32>,
}

/// The plan as it stands, one row a line in the compact form, from its
/// seats in order (rank, run, position; seats off the plan left out).
pub fn compact(seats: &[PlacedSeat<'_>]) -> String {
    let mut rows: Vec<CompactRow> = Vec::new();
    let mut last_run = None;
    for seat in seats {
        let same_row = rows
            .last()
            .is_some_and(|r| r.row == seat.row_label && r.rank == seat.row_rank);
        if !same_row {
            rows.push(CompactRow {
                row: seat.row_label,
                rank: seat.row_rank,
                seats: [seat.number, seat.number],
                aisles_after: Vec::new(),
                wheelchair: Vec::new(),
                companion: Vec::new(),
            });
            last_run = None;
        }
        let row = rows.last_mut().expect("pushed");
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
    rows.iter()
        .map(|row| {
            // labels are letters, digits and " ._-": every comma and
            // colon is the JSON's own
            serde_json::to_string(row)
                .unwrap_or_default()
                .replace(',', ", ")
                .replace(':', ": ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_rows_are_read_and_written_back_alike() {
        let typed = "{\"row\": \"C\", \"rank\": 3, \"seats\": [1, 6], \"aisles_after\": [3], \
                     \"wheelchair\": [1]}\n\n{\"row\": \"D\", \"seats\": [2, 4]},";
        let rows = typed_rows(typed).unwrap();
        assert_eq!(rows[0]["rank"], 3);
        assert_eq!(rows[1]["rank"], 2, "a row without a rank takes its place");
        let seats: Vec<PlacedSeat> = (1..=6)
            .map(|n| PlacedSeat {
                row_label: "C",
                number: n,
                row_rank: 3,
                run: if n <= 3 { 3000 } else { 3001 },
                access: if n == 1 { "wheelchair" } else { "none" },
            })
            .collect();
        assert_eq!(
            compact(&seats),
            "{\"row\": \"C\", \"rank\": 3, \"seats\": [1, 6], \"aisles_after\": [3], \"wheelchair\": [1]}"
        );
        assert_eq!(typed_rows(&compact(&seats)).unwrap()[0], rows[0]);
    }

    #[test]
    fn a_wrong_plan_is_said_in_words_that_name_the_line() {
        let cases = [
            ("{not json", "Line 1: not a row."),
            (
                "{\"row\": \"A\", \"seats\": [1, 4]}\n{\"row\": \"A\", \"seats\": [1, 4]}",
                "Line 2: row A is given twice",
            ),
            (
                "{\"row\": \"A\", \"seat\": [1, 4]}",
                "Line 1: \"seat\" is not part of a row",
            ),
            (
                "{\"row\": \"A\", \"seats\": [4, 1]}",
                "Line 1: row A: seats are [first, last]",
            ),
            (
                "{\"row\": \"A\", \"seats\": [1]}",
                "Line 1: row A: seats are its first and last",
            ),
            (
                "{\"row\": \"A\", \"seats\": [1, 4], \"aisles_after\": [9]}",
                "Line 1: row A: aisles_after names seat 9",
            ),
            (
                "{\"row\": \"A\", \"rank\": 0, \"seats\": [1, 4]}",
                "Line 1: row A: its rank is",
            ),
            (
                "[{\"row\": \"A\", \"seats\": [1, 4]}",
                "The plan starts with [",
            ),
            (
                "{\"row\": \"A\", \"seats\": [1, 999]}\n{\"row\": \"B\", \"seats\": [1, 999]}\n{\"row\": \"C\", \"seats\": [1, 999]}\n{\"row\": \"D\", \"seats\": [1, 999]}\n{\"row\": \"E\", \"seats\": [1, 999]}\n{\"row\": \"F\", \"seats\": [1, 999]}",
                "at most 5000 seats",
            ),
            ("", "Type the plan's rows"),
        ];
        for (typed, words) in cases {
            let said = typed_rows(typed).unwrap_err();
            assert!(said.contains(words), "{typed}: {said}");
        }
    }
}
