//! The read-then-write implementation every codebase starts with, kept only
//! so `bench --naive` and the tests can show what it does under load. It
//! reads the count into Rust, decides, and writes the count back: two buyers
//! who read the same count both win.
//!
//! Its tables are made here, in the database being measured, the first time
//! a resource is made: they belong to the benchmark, never to `migrate`.
//! There is deliberately no CHECK constraint, so what it oversells is
//! recorded instead of refused.

use sqlx::PgPool;

use holdfast::inventory::{AccountId, Capacity, Quantity, ResourceId};

#[derive(Debug, Clone)]
pub struct NaiveInventory {
    pool: PgPool,
}

impl NaiveInventory {
    pub fn new(pool: PgPool) -> Self {
        Self { pool }
    }

    /// The baseline's two tables, if this database has none yet.
    async fn create_tables(&self) -> sqlx::Result<()> {
        let mut tx = self.pool.begin().await?;
        // one creator at a time: concurrent `create table if not exists`
        // can still collide on the catalog
        sqlx::query("select pg_advisory_xact_lock(hashtext('naive baseline tables'))")
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "create table if not exists naive_resources ( \
                 id text primary key, \
                 total integer not null, \
                 taken integer not null default 0)",
        )
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "create table if not exists naive_holds ( \
                 id bigint generated always as identity primary key, \
                 resource_id text not null references naive_resources (id), \
                 account_id text not null, \
                 qty integer not null, \
                 created_at timestamptz not null default now())",
        )
        .execute(&mut *tx)
        .await?;
        sqlx::query("create index if not exists naive_holds_resource on naive_holds (resource_id)")
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }

    pub async fn create_resource(&self, id: &ResourceId, total: Capacity) -> sqlx::Result<()> {
        self.create_tables().await?;
        sqlx::query("insert into naive_resources (id, total) values ($1, $2)")
            .bind(id.as_str())
            .bind(total.get())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Returns whether the hold was granted.
    pub async fn hold(
        &self,
        resource: &ResourceId,
        qty: Quantity,
        account: &AccountId,
    ) -> sqlx::Result<bool> {
        // the race: nothing stops another buyer between this read...
        let (total, taken): (i32, i32) =
            sqlx::query_as("select total, taken from naive_resources where id = $1")
                .bind(resource.as_str())
                .fetch_one(&self.pool)
                .await?;
        if taken + qty.get() > total {
            return Ok(false);
        }
        // ...and these writes, which store a count computed from the read
        sqlx::query("insert into naive_holds (resource_id, account_id, qty) values ($1, $2, $3)")
            .bind(resource.as_str())
            .bind(account.as_str())
            .bind(qty.get())
            .execute(&self.pool)
            .await?;
        sqlx::query("update naive_resources set taken = $2 where id = $1")
            .bind(resource.as_str())
            .bind(taken + qty.get())
            .execute(&self.pool)
            .await?;
        Ok(true)
    }

    /// Units held according to the hold rows (not the counter, which the
    /// race also corrupts).
    pub async fn units_held(&self, resource: &ResourceId) -> sqlx::Result<i64> {
        sqlx::query_scalar(
            "select coalesce(sum(qty), 0)::int8 from naive_holds where resource_id = $1",
        )
        .bind(resource.as_str())
        .fetch_one(&self.pool)
        .await
    }

    /// What the counter says (it drifts from the rows under the race).
    pub async fn counter(&self, resource: &ResourceId) -> sqlx::Result<i64> {
        sqlx::query_scalar("select taken::int8 from naive_resources where id = $1")
            .bind(resource.as_str())
            .fetch_one(&self.pool)
            .await
    }
}
