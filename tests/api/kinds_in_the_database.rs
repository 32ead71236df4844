//! The rows the code's lists answer to belong to migrations (issue 44:
//! "the schema belongs to migrations"): `holdfast migrate` runs the
//! migrations and writes nothing else, so these tests hold what they wrote
//! equal to the code. A new kind without its `product_kinds` row, a sheet
//! whose code or checker changed without a migration, or a provider the
//! CHECKs do not name fails here, not in a shop.

use holdfast::catalogue::{CollectionKind, ProductKind};
use holdfast::payments::ProviderKind;
use holdfast_testkit::TestDb;

#[tokio::test]
async fn every_product_kind_has_its_row_saying_its_code_and_what_checks_it() {
    let db = TestDb::new().await;
    let rows: Vec<(String, Option<String>, Option<String>)> =
        sqlx::query_as("select kind, code, checked_by from product_kinds order by kind")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    let mut expected: Vec<(String, Option<String>, Option<String>)> = ProductKind::ALL
        .iter()
        .map(|kind| {
            let words = kind.code_words();
            (
                kind.as_str().to_owned(),
                words.map(|w| w.noun.to_owned()),
                words.map(|w| w.checked_by.as_str().to_owned()),
            )
        })
        .collect();
    expected.sort();
    assert_eq!(rows, expected);
}

#[tokio::test]
async fn every_collection_kind_has_its_row() {
    let db = TestDb::new().await;
    let rows: Vec<String> = sqlx::query_scalar("select kind from collection_kinds order by kind")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    let mut expected: Vec<String> = CollectionKind::ALL
        .iter()
        .map(|kind| kind.as_str().to_owned())
        .collect();
    expected.sort();
    assert_eq!(rows, expected);
}

#[tokio::test]
async fn the_checks_that_name_providers_name_every_provider() {
    let db = TestDb::new().await;
    let mut providers: Vec<&str> = ProviderKind::ALL.iter().map(|p| p.as_str()).collect();
    providers.sort_unstable();
    for (table, constraint) in [
        ("orders", "order_provider_known"),
        ("orphan_payments", "orphan_provider_known"),
        ("settle_windows", "settle_window_provider_known"),
    ] {
        let definition: String = sqlx::query_scalar(
            "select pg_get_constraintdef(oid) from pg_constraint \
              where conname = $1 and conrelid = to_regclass($2)",
        )
        .bind(constraint)
        .bind(table)
        .fetch_one(&db.pool)
        .await
        .unwrap_or_else(|e| panic!("{table}.{constraint}: {e}"));
        let mut named: Vec<&str> = definition.split('\'').skip(1).step_by(2).collect();
        named.sort_unstable();
        assert_eq!(named, providers, "{table}.{constraint}: {definition}");
    }
}

#[tokio::test]
async fn migrating_again_changes_nothing() {
    let db = TestDb::new().await;
    let print = |pool: sqlx::PgPool| async move {
        sqlx::query_scalar::<_, String>(
            "select (select string_agg(k::text, '|' order by k.kind) from product_kinds k) \
                    || (select string_agg(c::text, '|' order by c.kind) from collection_kinds c) \
                    || (select string_agg(pg_get_constraintdef(oid), '|' order by conname) \
                          from pg_constraint where conname like '%provider_known') \
                    || (select count(*)::text from _sqlx_migrations)",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    let before = print(db.pool.clone()).await;
    let mut conn = db.pool.acquire().await.unwrap();
    holdfast::database::migrate(&mut conn).await.unwrap();
    drop(conn);
    assert_eq!(print(db.pool.clone()).await, before);
}
