//! Integration tests: one binary, real PostgreSQL, real HTTP.

mod admin;
mod admin_forms;
mod admin_words;
mod api_keys;
mod api_v1;
mod bad_input;
mod basket_stays;
mod baskets;
mod browser;
mod catalogue_admin;
mod catalogue_file;
mod checkout;
mod cli;
mod cli_api_keys;
mod combined_checkout;
mod combining;
mod crowd;
mod door;
mod drafts;
mod exports;
mod failover;
mod fairness;
mod free_orders;
mod fuzz_regressions;
mod health;
mod home;
mod host_stand;
mod housekeeping;
mod images;
mod items_migration;
mod journey;
mod kinds_in_the_database;
mod lifecycle;
mod live_keys;
mod lost_answers;
mod mail;
mod mixed_orders;
mod official_sdks;
mod order_numbers;
mod order_search;
mod outage;
mod outgoing;
mod providers;
mod queue;
mod razorpay;
mod razorpay_adapter;
mod recovery;
mod redemption;
mod roles;
mod round_trips;
mod sale_windows;
mod scale_out;
mod schedule_days;
mod schema;
mod seat_admin;
mod seat_batches;
mod seat_memory;
mod seats;
mod seats_best;
mod seats_everywhere;
mod settling;
mod shop_words;
mod soak;
mod staff_accounts;
mod staff_invites;
mod staff_refunds;
mod storefront;
mod storms;
mod stripe_adapter;
mod stripe_cli;
mod tables;
mod tables_admin;
mod tables_cancel;
mod tables_memory;
mod tables_pages;
mod time_zone;
mod two_factor;
mod vouchers;
mod waitlist;
mod waitlist_handover;
mod ways_to_pay;
mod what_it_is_for;

/// The code of an order's first item of a product kind (`pickup_slot`,
/// `table`, `ticket`, …), as its shopper holds it; `None` without one.
pub async fn item_code(pool: &sqlx::PgPool, order: uuid::Uuid, kind: &str) -> Option<String> {
    sqlx::query_scalar(
        "select i.code from order_items i join products p on p.id = i.product_id \
          where i.order_id = $1 and p.kind = $2 order by i.id limit 1",
    )
    .bind(order)
    .bind(kind)
    .fetch_optional(pool)
    .await
    .expect("an order's items")
}
