//! The voucher the shopper typed, judged for the basket by the database's
//! clock before anything is held, as the basket's page judged it
//! ([`basket::judge_voucher`]): a code that cannot be used is refused with
//! the basket as it was read. Its uses are the engine's to grant, with the
//! order's units (a voucher's uses are capacity: `vouchers`); a voucher
//! used once per buyer has its buyer's one use made to exist first, so the
//! checkout only holds it.

use super::refused::as_read;
use super::{BeginRequest, Begun, Desk};
use crate::checkout::basket::{self, BasketLine, JudgedVoucher};
use crate::checkout::{CheckoutError, CheckoutRead, Customer, Result, VoucherUse};
use crate::inventory::InventoryError;
use crate::retry::{Bound, retry};
use crate::vouchers::Refusal;

/// The voucher of the form, if it names one; or the refusal to say.
pub(super) async fn typed(
    desk: Desk<'_>,
    request: &BeginRequest,
    read: &CheckoutRead,
    customer: &Customer,
) -> Result<std::result::Result<Option<VoucherUse>, Begun>> {
    let Some(typed) = request
        .voucher
        .as_deref()
        .map(str::trim)
        .filter(|code| !code.is_empty())
    else {
        return Ok(Ok(None));
    };
    let basket = as_read(read);
    Ok(match voucher_for(desk, typed, &basket, customer).await? {
        Ok(voucher) => Ok(Some(voucher)),
        Err((code, refusal)) => Err(Begun::BadVoucher {
            code,
            refusal,
            basket,
        }),
    })
}

/// The voucher a shopper typed, judged for this basket by the database's
/// clock; or the code and why it cannot be used. Its uses are the engine's
/// to grant, with the order's units.
async fn voucher_for(
    desk: Desk<'_>,
    typed: &str,
    lines: &[BasketLine],
    customer: &Customer,
) -> Result<std::result::Result<VoucherUse, (String, Refusal)>> {
    let judged = retry("voucher_read", Bound::Shopper, || {
        basket::judge_voucher(desk.pool, typed, lines)
    })
    .await?;
    let JudgedVoucher { code, voucher, .. } = match judged {
        Ok(judged) => judged,
        Err(refused) => return Ok(Err(refused)),
    };
    let buyer = voucher
        .per_buyer
        .then(|| code.buyer_resource(&crate::limits::email_key(customer.email())));
    if let Some(buyer) = &buyer {
        retry("voucher_buyer", Bound::Shopper, || async {
            crate::vouchers::ensure_buyer_use(desk.pool, buyer)
                .await
                .map_err(|e| match e.downcast::<InventoryError>() {
                    Ok(InventoryError::Database(db)) => CheckoutError::Database(db),
                    Ok(other) => CheckoutError::Inventory(other),
                    Err(other) => CheckoutError::InvalidInput(other.to_string()),
                })
        })
        .await?;
    }
    Ok(Ok(VoucherUse { voucher, buyer }))
}
