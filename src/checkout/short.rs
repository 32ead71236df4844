//! When a checkout is short: the one rule, asked of what the shop's memory
//! holds and of what a read without the lock saw. Either source may refuse
//! a checkout; only the locked path grants one.

use serde::Serialize;

/// A line that cannot be had, in the shopper's words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShortLine {
    pub product_id: String,
    pub name: String,
    pub requested: i32,
    pub available: i32,
}

/// A basket line as the rule takes it.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    pub product_id: &'a str,
    pub name: &'a str,
    pub qty: i32,
    /// The resource the product draws on.
    pub resource: &'a str,
}

/// What a resource has to give, as one source knows it.
#[derive(Debug, Clone, Copy)]
pub struct Supply {
    /// Units left: the committed counters' `total - held - sold`.
    pub left: i32,
    /// Whether `left` is the answer the locked path would give now:
    /// nothing held on the resource is due to come back (and, from memory,
    /// nothing changed since the form was made). An unsettled resource is
    /// never short by this rule; the engine decides under its lock.
    pub settled: bool,
}

/// The lines that cannot fit: the units wanted of a resource (several
/// lines may name one) are more than it has left, where that is settled.
/// `supply` answers for a resource, or `None` when the source does not know
/// it (then that resource is not short here either).
pub fn short_lines(
    lines: &[Wanted<'_>],
    supply: impl Fn(&str) -> Option<Supply>,
) -> Vec<ShortLine> {
    let wanted = |resource: &str| -> i32 {
        lines
            .iter()
            .filter(|l| l.resource == resource)
            .map(|l| l.qty)
            .sum()
    };
    lines
        .iter()
        .filter_map(|line| {
            let supply = supply(line.resource).filter(|s| s.settled)?;
            (wanted(line.resource) > supply.left).then(|| ShortLine {
                product_id: line.product_id.to_owned(),
                name: line.name.to_owned(),
                requested: line.qty,
                available: supply.left.max(0),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line<'a>(product_id: &'a str, qty: i32, resource: &'a str) -> Wanted<'a> {
        Wanted {
            product_id,
            name: product_id,
            qty,
            resource,
        }
    }

    #[test]
    fn lines_on_one_resource_are_short_together_and_only_where_settled() {
        let lines = [line("a", 2, "r"), line("b", 2, "r"), line("c", 5, "s")];
        let supply = |resource: &str| match resource {
            "r" => Some(Supply {
                left: 3,
                settled: true,
            }),
            "s" => Some(Supply {
                left: 1,
                settled: false,
            }),
            _ => None,
        };
        let short = short_lines(&lines, supply);
        // 2 + 2 of r's 3: both lines are short; s may free units, so it is not
        let names: Vec<_> = short.iter().map(|l| l.product_id.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(short.iter().all(|l| l.available == 3));
        assert!(short_lines(&[line("a", 3, "r")], supply).is_empty());
        assert!(short_lines(&[line("x", 9, "unknown")], supply).is_empty());
    }

    #[test]
    fn what_is_left_is_never_told_below_zero() {
        let short = short_lines(&[line("a", 1, "r")], |_| {
            Some(Supply {
                left: -2,
                settled: true,
            })
        });
        assert_eq!(short[0].available, 0);
    }
}
