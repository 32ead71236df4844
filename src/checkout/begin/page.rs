//! The provider's payment page for a started order: its lines as the
//! shopper bought them (a dated line with its date, a line a voucher
//! touched as one at what is paid for it), where the provider sends the
//! shopper back, and how long the page lives. Also how a waiting-list
//! offer's claim opens its page.

use super::Desk;
use crate::checkout::{Order, OrderLine};
use crate::payments::methods::PayMethod;
use crate::payments::{PageLine, PageRequest, PaymentPage, ProviderError};

/// The provider's payment page for a started order.
pub async fn open_page(
    desk: Desk<'_>,
    order: &Order,
    lines: &[OrderLine],
    method: Option<PayMethod>,
) -> std::result::Result<PaymentPage, ProviderError> {
    let provider = desk.payments.for_order(order.provider)?;
    let base = desk.base_url;
    // a dated line says its date at the provider too: "Winter Jazz —
    // General, Mon 20 Dec 19:30 CET" (a read failing leaves the names)
    let days = crate::checkout::LineTimes::of(desk.pool, order.id)
        .await
        .map(|lines| lines.days(desk.zone))
        .unwrap_or_default();
    let named = |line: &OrderLine| match days.get(&line.product_id) {
        Some(day) => format!("{}, {day}", line.name),
        None => line.name.clone(),
    };
    let request = PageRequest {
        order_id: order.id,
        amount_minor: order.amount_minor,
        currency: order.currency.clone(),
        lines: lines
            .iter()
            .map(|line| {
                if line.paid_minor == line.unit_price_minor * i64::from(line.qty) {
                    PageLine {
                        name: named(line),
                        qty: line.qty.unsigned_abs(),
                        unit_amount_minor: line.unit_price_minor,
                    }
                } else {
                    // a voucher's share of the line may not divide into its
                    // units: the line as one, at what is paid for it
                    PageLine {
                        name: format!("{} × {} (with your voucher)", named(line), line.qty),
                        qty: 1,
                        unit_amount_minor: line.paid_minor,
                    }
                }
            })
            .collect(),
        customer_name: order.customer_name.clone(),
        customer_email: order.customer_email.clone(),
        return_url: format!("{base}/checkout/return/{}", order.token),
        cancel_url: format!("{base}/checkout/cancel/{}", order.token),
        pay_url: format!("{base}/pay/{}", order.token),
        lifetime: std::time::Duration::from_secs(desk.session_minutes.unsigned_abs() * 60),
        method,
    };
    provider.open_page(&request).await
}
