//! Codes a shopper sees: the order link's token and a checkout form's key
//! (an item's code is [`crate::items::issue::item_code`]). All drawn from
//! the operating system's randomness (rand's thread RNG).

use rand::Rng;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_has_its_shape_and_differs() {
        let token = order_token();
        assert_eq!(token.len(), 64);
        assert!(token.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(order_token(), token);
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
