//! Bad input of a refund, said before anything is read: a reason missing
//! or too long, units negative or named twice, a form key of another
//! shape, too many items or one named twice.

use super::{MAX_ITEMS, MAX_REASON_CHARS, Picked, RefundRequest};

/// Too many items, or the same twice: bad input.
pub fn check_picked(picked: &Picked) -> Result<(), String> {
    if picked.items.is_empty() {
        return Ok(());
    }
    if picked.items.len() > MAX_ITEMS {
        return Err(format!("a refund names at most {MAX_ITEMS} items"));
    }
    let mut ids = picked.items.clone();
    ids.sort_unstable();
    ids.dedup();
    if ids.len() != picked.items.len() {
        return Err("name each item once".into());
    }
    Ok(())
}

/// Bad input, said before anything is read.
pub fn check(request: &RefundRequest) -> Result<(), String> {
    let reason = request.reason.trim();
    if reason.is_empty() {
        return Err("say why the order is refunded (the shopper is told)".into());
    }
    if reason.chars().count() > MAX_REASON_CHARS {
        return Err(format!(
            "the reason is at most {MAX_REASON_CHARS} characters"
        ));
    }
    if request.units.iter().any(|(_, n)| *n < 0) {
        return Err("units to refund cannot be negative".into());
    }
    let mut products: Vec<&str> = request.units.iter().map(|(p, _)| p.as_str()).collect();
    products.sort();
    let named = products.len();
    products.dedup();
    if products.len() != named {
        return Err("name each product once".into());
    }
    if !request.units.is_empty() && request.units.iter().all(|(_, n)| *n == 0) {
        return Err("choose at least one unit to refund".into());
    }
    let key_shaped = |key: &str| {
        (16..=64).contains(&key.len())
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if request.key.as_deref().is_some_and(|key| !key_shaped(key)) {
        return Err("the refund form is out of date; reload the order and try again".into());
    }
    Ok(())
}
