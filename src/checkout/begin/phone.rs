//! Who is buying: the name and e-mail every order has, and a phone only
//! from a party's guest (a table booking's), whose restaurant may need to
//! call; anyone else's phone is not kept, whatever the form sent.

use super::BeginRequest;
use crate::checkout::{CheckoutRead, Customer};

/// The customer the form names, with a phone when a line's kind asks for
/// one (a table's); or why the name, e-mail or phone cannot be used.
pub(super) fn customer(request: &BeginRequest, read: &CheckoutRead) -> Result<Customer, String> {
    // a booking's guest gives a phone; anyone else's is not kept
    let asks_phone = read.lines.iter().any(|line| line.kind.asks_phone());
    Customer::parse(&request.name, &request.email)
        .and_then(|customer| {
            customer.with_phone(request.phone.as_deref().filter(|_| asks_phone), asks_phone)
        })
        .map_err(|error| error.0)
}
