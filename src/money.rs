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
