//! Money as people read it: on pages, in mail, at the command line.

/// An amount in minor units, as a shopper reads it: `€12.50`, `12.50 CHF`.
pub fn format(minor: i64, currency: &str) -> String {
    let symbol = match currency {
        "eur" => "€",
        "usd" => "$",
        "gbp" => "£",
        "inr" => "₹",
        _ => "",
    };
    let amount = format!("{}.{:02}", minor / 100, minor % 100);
    if symbol.is_empty() {
        format!("{amount} {}", currency.to_uppercase())
    } else {
        format!("{symbol}{amount}")
    }
}

/// An amount as staff type it, in major units with at most two decimals
/// (`35`, `35.5`, `35.50`; a comma for the point too): its minor units.
/// Negative, empty or absurd amounts are refused in words.
pub fn parse(typed: &str) -> Result<i64, String> {
    let text = typed.trim().replace(',', ".");
    let refused = || {
        format!(
            "{:?} is not an amount like 35 or 35.50",
            typed.trim().chars().take(40).collect::<String>()
        )
    };
    if text.starts_with('-') {
        return Err("an amount is zero or more".into());
    }
    let (whole, cents) = match text.split_once('.') {
        Some((whole, cents)) => (whole, cents),
        None => (text.as_str(), ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || whole.len() > 9 || !digits(whole) || cents.len() > 2 || !digits(cents) {
        return Err(refused());
    }
    let whole: i64 = whole.parse().map_err(|_| refused())?;
    let cents: i64 = match cents.len() {
        0 => 0,
        1 => cents.parse::<i64>().map_err(|_| refused())? * 10,
        _ => cents.parse().map_err(|_| refused())?,
    };
    Ok(whole * 100 + cents)
}

/// Minor units as [`parse`] reads them back: `35.50`.
pub fn typed(minor: i64) -> String {
    format!("{}.{:02}", minor / 100, minor % 100)
}

#[cfg(test)]
mod tests {
    #[test]
    fn amounts_read_as_staff_type_them() {
        for (typed, minor) in [
            ("35", 3500),
            ("35.5", 3550),
            (" 35.50 ", 3550),
            ("0", 0),
            ("12,05", 1205),
        ] {
            assert_eq!(super::parse(typed), Ok(minor), "{typed}");
        }
        for bad in [
            "",
            "-1",
            "-0.50",
            "1.234",
            "abc",
            "1e3",
            "1.2.3",
            ".5",
            "9999999999",
        ] {
            assert!(super::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(super::typed(3550), "35.50");
        assert_eq!(super::parse(&super::typed(1205)), Ok(1205));
    }
}
