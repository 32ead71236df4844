// The migrations are embedded at compile time (sqlx::migrate!): a new or
// edited file under migrations/ must rebuild the crate, or a stale binary
// would run without it.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
