//! Codes a shopper sees: the order link's token, pickup and ticket codes.
//! All drawn from the operating system's randomness (rand's thread RNG).

use rand::Rng;

/// Letters and digits that cannot be mistaken for each other when read out
/// at a counter (no 0/O, 1/I/L).
const READABLE: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";

fn readable(len: usize) -> String {
    let mut rng = rand::thread_rng();
    (0..len)
        .map(|_| READABLE[rng.gen_range(0..READABLE.len())] as char)
        .collect()
}

/// The order page's link: 256 random bits, URL-safe.
pub fn order_token() -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes: [u8; 32] = rand::thread_rng().r#gen();
    let mut token = String::with_capacity(64);
    for b in bytes {
        token.push(HEX[usize::from(b >> 4)] as char);
        token.push(HEX[usize::from(b & 15)] as char);
    }
    token
}

/// A checkout form's key: when the form was made (milliseconds since the
/// epoch), then 256 random bits. Submitting one form twice is one order;
/// the time lets a sold-out answer come from memory only for a form made
/// after the product last changed (see [`key_minted_at`]).
pub fn checkout_key() -> String {
    format!(
        "{}-{}",
        chrono::Utc::now().timestamp_millis(),
        order_token()
    )
}

/// When a checkout key from [`checkout_key`] was made; `None` for a key of
/// another shape or one made more than a minute in the future. A key is
/// the shopper's own: a made-up time only ever changes their own answer.
pub fn key_minted_at(key: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    let (millis, rest) = key.split_once('-')?;
    if millis.is_empty()
        || millis.len() > 15
        || !millis.bytes().all(|b| b.is_ascii_digit())
        || rest.is_empty()
    {
        return None;
    }
    let at = chrono::DateTime::from_timestamp_millis(millis.parse().ok()?)?;
    (at <= chrono::Utc::now() + chrono::Duration::minutes(1)).then_some(at)
}

/// Said at the bakery's counter.
pub fn pickup_code() -> String {
    readable(6)
}

/// Scanned or read at the door.
pub fn ticket_code() -> String {
    format!("TKT-{}-{}", readable(4), readable(4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_have_their_shape_and_differ() {
        let token = order_token();
        assert_eq!(token.len(), 64);
        assert!(token.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(order_token(), token);
        let pickup = pickup_code();
        assert_eq!(pickup.len(), 6);
        assert!(pickup.bytes().all(|b| READABLE.contains(&b)));
        let ticket = ticket_code();
        assert!(ticket.starts_with("TKT-") && ticket.len() == 13, "{ticket}");
    }

    #[test]
    fn a_checkout_key_says_when_it_was_made_and_nothing_else_does() {
        let before = chrono::Utc::now() - chrono::Duration::milliseconds(1);
        let key = checkout_key();
        let minted = key_minted_at(&key).expect("a key of ours");
        assert!(minted >= before && minted <= chrono::Utc::now(), "{key}");
        assert_ne!(checkout_key(), key);
        let future = chrono::Utc::now().timestamp_millis() + 120_000;
        for other in [
            order_token(),
            "load-1".to_owned(),
            "-abc".to_owned(),
            "123-".to_owned(),
            "12a-x".to_owned(),
            "9999999999999999-x".to_owned(),
            format!("{future}-x"),
        ] {
            assert_eq!(key_minted_at(&other), None, "{other}");
        }
        assert!(key_minted_at("1700000000000-x").is_some());
    }
}
