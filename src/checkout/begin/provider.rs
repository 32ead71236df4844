//! Who takes the money: the provider the shopper chose, or the shop's
//! default when the form names none; a provider the shop has no keys for
//! is not offered, so a form that names one is refused before anything is
//! read into an order.

use super::{BeginRequest, Desk};
use crate::payments::ProviderKind;

/// The provider that serves this checkout; `None`: the shop does not
/// offer the one named (or offers none).
pub(super) fn chosen(desk: Desk<'_>, request: &BeginRequest) -> Option<ProviderKind> {
    desk.payments.chosen(request.provider.as_deref())
}
