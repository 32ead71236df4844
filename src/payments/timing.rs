//! Whether a way to pay can be offered for what starts soon. A bank debit
//! (SEPA Direct Debit) is committed at once but known to be money only up
//! to the provider's window later (Stripe: up to 14 business days); the
//! units wait for it ([`crate::checkout::settling`]). For a concert on
//! Sunday the money could come after the concert, and the codes with it:
//! so such a way is offered only when its window, the shop's grace after
//! it and a day's margin end before the first thing in the order starts.
//! The windows are the `settle_windows` the engine settles by.

use chrono::{DateTime, Datelike, Duration, Utc};
use sqlx::PgPool;

use super::ProviderKind;
use super::methods::PayMethod;
use crate::inventory::SettleWindow;

/// A day between the money at the latest and the start, for a bank
/// holiday or a webhook retried for a while.
pub const MARGIN: Duration = Duration::days(1);

/// The windows delayed ways settle in, and the shop's grace after them.
#[derive(Debug, Clone, Default)]
pub struct SettleTerms {
    pub windows: Vec<SettleWindow>,
    pub grace: Duration,
}

/// Why a way is not offered: it may settle after the order starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooSlow {
    pub method: PayMethod,
    pub days: i32,
    pub business_days: bool,
}

impl TooSlow {
    /// In the shop's words: "SEPA Direct Debit is not offered for this
    /// order: the bank can take up to 14 banking days to clear it, and
    /// your order starts sooner."
    pub fn words(&self) -> String {
        format!(
            "{} is not offered for this order: the bank can take up to {} {}days to clear it, \
             and your order starts sooner.",
            self.method.label(),
            self.days,
            if self.business_days { "banking " } else { "" }
        )
    }
}

impl PayMethod {
    /// Whether its money is known only days after the shopper commits (a
    /// bank debit), not at once.
    pub fn settles_later(self) -> bool {
        matches!(self, PayMethod::SepaDebit)
    }
}

/// When a payment committed at `from` has settled at the latest: `days`
/// later, counting Monday to Friday (in UTC) only when `business_days`, as
/// the engine's `hf_settle_deadline` counts.
pub fn settled_by(from: DateTime<Utc>, days: i32, business_days: bool) -> DateTime<Utc> {
    if !business_days {
        return from + Duration::days(i64::from(days));
    }
    let mut at = from;
    let mut left = days;
    while left > 0 {
        at += Duration::days(1);
        if at.weekday().number_from_monday() < 6 {
            left -= 1;
        }
    }
    at
}

impl SettleTerms {
    /// The window `kind` settles `method` in: its own row, else the
    /// provider's `*`.
    fn window(&self, kind: ProviderKind, method: PayMethod) -> Option<&SettleWindow> {
        let of = |name: &str| {
            self.windows
                .iter()
                .find(|w| w.provider == kind.as_str() && w.method == name)
        };
        of(method.as_str()).or_else(|| of("*"))
    }

    /// Why `method`, served by `kind`, cannot be offered now for an order
    /// whose first item starts at `starts`; `None`: it can (it settles at
    /// once, or in time, or nothing in the order starts at a moment).
    pub fn too_slow(
        &self,
        kind: ProviderKind,
        method: PayMethod,
        starts: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Option<TooSlow> {
        let starts = starts?;
        if !method.settles_later() {
            return None;
        }
        let window = self.window(kind, method)?;
        let money_by = settled_by(now, window.days, window.business_days) + self.grace + MARGIN;
        (money_by >= starts).then_some(TooSlow {
            method,
            days: window.days,
            business_days: window.business_days,
        })
    }
}

/// The terms as the database has them.
pub async fn read(pool: &PgPool) -> sqlx::Result<SettleTerms> {
    let windows: Vec<SettleWindow> = sqlx::query_as(
        "select provider, method, days, business_days, source from settle_windows \
          order by provider, method",
    )
    .fetch_all(pool)
    .await?;
    let grace: Option<f64> = sqlx::query_scalar(
        "select extract(epoch from settle_grace)::float8 from inventory_settings",
    )
    .fetch_optional(pool)
    .await?;
    Ok(SettleTerms {
        windows,
        grace: Duration::milliseconds((grace.unwrap_or(86_400.0) * 1000.0) as i64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn sepa_terms() -> SettleTerms {
        SettleTerms {
            windows: vec![SettleWindow {
                provider: "stripe".into(),
                method: "sepa_debit".into(),
                days: 14,
                business_days: true,
                source: "docs.stripe.com/payments/sepa-debit".into(),
            }],
            grace: Duration::days(1),
        }
    }

    #[test]
    fn business_days_skip_weekends() {
        // Friday 4 Dec 2026, noon: 14 banking days is Thursday 24 Dec
        let friday = Utc.with_ymd_and_hms(2026, 12, 4, 12, 0, 0).unwrap();
        assert_eq!(
            settled_by(friday, 14, true),
            Utc.with_ymd_and_hms(2026, 12, 24, 12, 0, 0).unwrap()
        );
        assert_eq!(
            settled_by(friday, 5, false),
            Utc.with_ymd_and_hms(2026, 12, 9, 12, 0, 0).unwrap()
        );
    }

    #[test]
    fn a_debit_is_offered_only_for_what_starts_after_it_could_clear() {
        let terms = sepa_terms();
        let now = Utc.with_ymd_and_hms(2026, 12, 4, 12, 0, 0).unwrap();
        // money by Thursday 24 Dec + a day's grace + a day's margin
        let concert = Utc.with_ymd_and_hms(2026, 12, 20, 19, 0, 0).unwrap();
        let slow = terms
            .too_slow(
                ProviderKind::Stripe,
                PayMethod::SepaDebit,
                Some(concert),
                now,
            )
            .unwrap();
        assert_eq!(
            slow.words(),
            "SEPA Direct Debit is not offered for this order: the bank can take up to 14 \
             banking days to clear it, and your order starts sooner."
        );
        let edge = Utc.with_ymd_and_hms(2026, 12, 26, 12, 0, 0).unwrap();
        assert!(
            terms
                .too_slow(ProviderKind::Stripe, PayMethod::SepaDebit, Some(edge), now)
                .is_some()
        );
        let later = edge + Duration::minutes(1);
        assert_eq!(
            terms.too_slow(ProviderKind::Stripe, PayMethod::SepaDebit, Some(later), now),
            None
        );
        // a card settles at once; stock starts at no moment
        assert_eq!(
            terms.too_slow(ProviderKind::Stripe, PayMethod::Card, Some(concert), now),
            None
        );
        assert_eq!(
            terms.too_slow(ProviderKind::Stripe, PayMethod::SepaDebit, None, now),
            None
        );
    }
}
