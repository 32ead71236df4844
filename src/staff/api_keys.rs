//! API keys: what the shop's other systems sign JSON API requests with.
//! Owners make and revoke them in the admin (the `integrations`
//! permission), and operators at the command line (`holdfast api-keys`). A key has scopes; each scope that reaches staff work
//! stands for the admin permission of that work ([`Scope::permission`]), so
//! a key may do through the API what a role with those permissions may do
//! in the admin, and no more. The token, `hf_<id>_<secret>`, is shown once;
//! only the SHA-256 of its secret is stored, compared in constant time.
//! Every key's actions are recorded in Activity with the key as the actor.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rand::RngCore;
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::PgPool;

use super::roles::Permission;
use crate::audit::{self, Actor};
use crate::live::LiveKey;

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The catalogue and live availability.
    ReadCatalogue,
    /// Starting checkouts for shoppers (a storefront elsewhere).
    StartCheckouts,
    /// Orders, their lines and payments.
    ReadOrders,
    /// Refunding orders.
    Refund,
    /// Redeeming codes at a door or counter.
    Redeem,
    /// Creating, listing and archiving vouchers.
    ManageVouchers,
    /// Orders and attendees as CSV.
    Export,
}

impl Scope {
    pub const ALL: [Scope; 7] = [
        Scope::ReadCatalogue,
        Scope::StartCheckouts,
        Scope::ReadOrders,
        Scope::Refund,
        Scope::Redeem,
        Scope::ManageVouchers,
        Scope::Export,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::ReadCatalogue => "read_catalogue",
            Scope::StartCheckouts => "start_checkouts",
            Scope::ReadOrders => "read_orders",
            Scope::Refund => "refund",
            Scope::Redeem => "redeem",
            Scope::ManageVouchers => "manage_vouchers",
            Scope::Export => "export",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name.trim())
    }

    /// Scopes written `a,b` (the command line's `--scopes`): each known,
    /// at least one; one named twice counts once.
    pub fn parse_list(text: &str) -> Result<Vec<Scope>, String> {
        let all = || Self::ALL.map(Self::as_str).join(", ");
        let mut scopes = Vec::new();
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let scope = Self::parse(name).ok_or_else(|| {
                format!(
                    "{:?} is not a scope; the scopes are {}",
                    name.chars().take(60).collect::<String>(),
                    all()
                )
            })?;
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        if scopes.is_empty() {
            return Err(format!("name at least one scope: {}", all()));
        }
        Ok(scopes)
    }

    /// The admin permission staff work through this scope stands for
    /// (`None`: what any shopper may do).
    pub fn permission(self) -> Option<Permission> {
        match self {
            Scope::ReadCatalogue | Scope::StartCheckouts => None,
            Scope::ReadOrders => Some(Permission::Orders),
            Scope::Refund => Some(Permission::Refunds),
            Scope::Redeem => Some(Permission::Redeem),
            Scope::ManageVouchers => Some(Permission::Vouchers),
            Scope::Export => Some(Permission::Exports),
        }
    }

    /// How the admin describes it.
    pub fn label(self) -> &'static str {
        match self {
            Scope::ReadCatalogue => "read the catalogue and availability",
            Scope::StartCheckouts => "start checkouts",
            Scope::ReadOrders => "read orders",
            Scope::Refund => "refund orders",
            Scope::Redeem => "redeem codes",
            Scope::ManageVouchers => "manage vouchers",
            Scope::Export => "export orders and attendees",
        }
    }
}

/// A key, as the admin lists it (never its secret).
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct ApiKeyRow {
    pub id: String,
    pub name: String,
    pub scopes: Vec<String>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub revoked_by: Option<String>,
}

/// A key that signed a request: who it is and what it may do.
#[derive(Debug, Clone)]
pub struct ApiKey {
    pub id: String,
    pub name: String,
    pub scopes: Vec<Scope>,
}

impl ApiKey {
    pub fn may(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }

    /// How Activity names it.
    pub fn actor_name(&self) -> String {
        Actor::from(self).name()
    }
}

fn hash(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// Make a key, for an owner in the admin or an operator at the command
/// line; returns it and its token (shown once).
pub async fn create(
    pool: &PgPool,
    by: Actor<'_>,
    name: &str,
    scopes: &[Scope],
) -> super::Result<(ApiKeyRow, String)> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(super::StaffError::InvalidInput(
            "name the key (1 to 100 characters), for whoever reads Activity".into(),
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(super::StaffError::InvalidInput(
            "the key's name must not contain control characters".into(),
        ));
    }
    if scopes.is_empty() {
        return Err(super::StaffError::InvalidInput(
            "give the key at least one scope".into(),
        ));
    }
    let mut id = [0u8; 6];
    rand::rngs::OsRng.fill_bytes(&mut id);
    let id = hex::encode(id);
    let secret = crate::keys::random_token();
    let token = format!("hf_{id}_{secret}");
    let scopes: Vec<&str> = scopes.iter().map(|s| s.as_str()).collect();
    let mut tx = pool.begin().await?;
    let row: ApiKeyRow = sqlx::query_as(
        "insert into api_keys (id, name, scopes, secret_hash, created_by) \
         values ($1, $2, $3, $4, $5) \
         returning id, name, scopes, created_by, created_at, last_used_at, revoked_at, revoked_by",
    )
    .bind(&id)
    .bind(name)
    .bind(&scopes)
    .bind(hash(&secret))
    .bind(by.name())
    .fetch_one(&mut *tx)
    .await?;
    audit::commit(
        tx,
        by,
        "add_api_key",
        &id,
        "ok",
        serde_json::json!({ "name": name, "scopes": scopes }),
    )
    .await?;
    Ok((row, token))
}

/// Revoke a key: it signs nothing from now on. Returns whether it was live.
pub async fn revoke(pool: &PgPool, by: Actor<'_>, id: &str) -> super::Result<bool> {
    let mut tx = pool.begin().await?;
    let revoked = sqlx::query(
        "update api_keys set revoked_at = now(), revoked_by = $2 \
          where id = $1 and revoked_at is null",
    )
    .bind(id)
    .bind(by.name())
    .execute(&mut *tx)
    .await?
    .rows_affected()
        > 0;
    let outcome = if revoked { "ok" } else { "unchanged" };
    audit::record(
        &mut tx,
        by,
        "revoke_api_key",
        &id.chars().take(40).collect::<String>(),
        outcome,
        serde_json::json!({}),
    )
    .await?;
    tx.commit().await?;
    audit::log_action(by, "revoke_api_key", id, outcome);
    Ok(revoked)
}

/// Which key a word names: a key's id, or the name of one live key.
#[derive(Debug)]
pub enum Named {
    Key(ApiKeyRow),
    /// No key has this id, and no live key this name.
    Nobody,
    /// Live keys share this name: these ids.
    Several(Vec<String>),
}

/// The key `id_or_name` names: the key with that id (live or revoked), or
/// else the one live key with that name.
pub async fn named(pool: &PgPool, id_or_name: &str) -> sqlx::Result<Named> {
    const COLUMNS: &str =
        "id, name, scopes, created_by, created_at, last_used_at, revoked_at, revoked_by";
    let by_id: Option<ApiKeyRow> =
        sqlx::query_as(&format!("select {COLUMNS} from api_keys where id = $1"))
            .bind(id_or_name)
            .fetch_optional(pool)
            .await?;
    if let Some(key) = by_id {
        return Ok(Named::Key(key));
    }
    let mut live: Vec<ApiKeyRow> = sqlx::query_as(&format!(
        "select {COLUMNS} from api_keys where name = $1 and revoked_at is null order by id"
    ))
    .bind(id_or_name.trim())
    .fetch_all(pool)
    .await?;
    Ok(match live.len() {
        0 => Named::Nobody,
        1 => Named::Key(live.remove(0)),
        _ => Named::Several(live.into_iter().map(|key| key.id).collect()),
    })
}

pub async fn list(pool: &PgPool) -> sqlx::Result<Vec<ApiKeyRow>> {
    sqlx::query_as(
        "select id, name, scopes, created_by, created_at, last_used_at, revoked_at, revoked_by \
           from api_keys order by created_at desc, id",
    )
    .fetch_all(pool)
    .await
}

/// A token's key id and its secret's hash, if it is shaped as a key's
/// (`hf_<12 hex>_<secret>`).
fn token_parts(token: &str) -> Option<(&str, Vec<u8>)> {
    let (id, secret) = token.strip_prefix("hf_")?.split_once('_')?;
    (id.len() == 12 && !secret.is_empty() && secret.len() <= 128).then(|| (id, hash(secret)))
}

/// Whether two secrets' hashes are the same, compared in constant time.
fn same_hash(stored: &[u8], given: &[u8]) -> bool {
    stored.len() == given.len()
        && stored
            .iter()
            .zip(given)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// A key whose last use is older than this is marked used again.
const MARK_EVERY: chrono::Duration = chrono::Duration::minutes(1);

/// The live key a token names, if any: its secret's hash compared in
/// constant time. Marks its last use (at most once a minute, so a busy key
/// does not write on every request).
pub async fn authenticate(pool: &PgPool, token: &str) -> sqlx::Result<Option<ApiKey>> {
    let Some((id, given)) = token_parts(token) else {
        return Ok(None);
    };
    let row: Option<LiveKey> = sqlx::query_as(
        "select id, name, scopes, secret_hash, last_used_at, revoked_at from api_keys \
          where id = $1 and revoked_at is null",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?;
    let Some(key) = signed(row.as_ref(), &given) else {
        return Ok(None);
    };
    mark_used(pool, id).await?;
    Ok(Some(key))
}

/// The live key a token names, from memory's copy of the keys (no read),
/// compared as [`authenticate`] compares: `None` when memory does not know
/// the token's key (made since its last read, or never: the database
/// answers), `Some(None)` for a key revoked or a secret not its. Its last
/// use is marked at most once a minute per key and process, after the
/// answer: a write no request waits for.
pub fn authenticate_from<'a>(
    known: impl FnOnce(&str) -> Option<&'a LiveKey>,
    pool: &PgPool,
    token: &str,
) -> Option<Option<ApiKey>> {
    let Some((id, given)) = token_parts(token) else {
        return Some(None);
    };
    let known = known(id)?;
    let live = known.revoked_at.is_none().then_some(known);
    let Some(key) = signed(live, &given) else {
        return Some(None);
    };
    let used_lately = known
        .last_used_at
        .is_some_and(|at| at > Utc::now() - MARK_EVERY);
    if !used_lately && marks_due(id) {
        let (pool, id) = (pool.clone(), id.to_owned());
        tokio::spawn(async move {
            if let Err(error) = mark_used(&pool, &id).await {
                tracing::debug!(%error, "could not mark an API key used");
            }
        });
    }
    Some(Some(key))
}

/// The key `live` is, if the secret's hash given is its (compared in
/// constant time whether or not there is a key).
fn signed(live: Option<&LiveKey>, given: &[u8]) -> Option<ApiKey> {
    let stored = live.map_or(&[0u8; 32][..], |k| &k.secret_hash[..]);
    let same = same_hash(stored, given);
    let live = live?;
    (same && !live.name.is_empty()).then(|| ApiKey {
        id: live.id.clone(),
        name: live.name.clone(),
        scopes: live.scopes.iter().filter_map(|s| Scope::parse(s)).collect(),
    })
}

/// Whether this process should mark `id` used now: not done within
/// [`MARK_EVERY`].
fn marks_due(id: &str) -> bool {
    static MARKED: std::sync::LazyLock<std::sync::Mutex<HashMap<String, std::time::Instant>>> =
        std::sync::LazyLock::new(Default::default);
    let mut marked = MARKED.lock().unwrap_or_else(|e| e.into_inner());
    let every = MARK_EVERY.to_std().unwrap_or_default();
    marked.retain(|_, at| at.elapsed() < every);
    marked
        .insert(id.to_owned(), std::time::Instant::now())
        .is_none()
}

async fn mark_used(pool: &PgPool, id: &str) -> sqlx::Result<()> {
    sqlx::query(
        "update api_keys set last_used_at = now() \
          where id = $1 and (last_used_at is null or last_used_at < now() - interval '1 minute')",
    )
    .bind(id)
    .execute(pool)
    .await?;
    Ok(())
}

/// A key acts as itself: how the audit log records what it did.
impl<'a> From<&'a ApiKey> for Actor<'a> {
    fn from(key: &'a ApiKey) -> Self {
        Actor::ApiKey {
            id: &key.id,
            name: &key.name,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_read_as_written_and_stand_for_staff_permissions() {
        for scope in Scope::ALL {
            assert_eq!(Scope::parse(scope.as_str()), Some(scope));
        }
        assert_eq!(Scope::parse("admin"), None);
        use crate::staff::roles::Role;
        // a door's work is redeeming; a box office's, orders and refunds
        assert!(Role::Door.may(Scope::Redeem.permission().unwrap()));
        assert!(!Role::Door.may(Scope::Refund.permission().unwrap()));
        assert!(Role::BoxOffice.may(Scope::ManageVouchers.permission().unwrap()));
        assert_eq!(Scope::ReadCatalogue.permission(), None);
    }
}

/// What an `Idempotency-Key` already stands for.
#[derive(Debug, Clone, PartialEq)]
pub enum Idempotent {
    /// New: go on, then [`answer`].
    Fresh,
    /// Used with the same body, answered: this answer again.
    Answered {
        status: u16,
        body: serde_json::Value,
    },
    /// Used with the same body, not answered yet (in flight, or its
    /// first try died): go on (what it runs is idempotent itself).
    Unanswered,
    /// Used with another body.
    OtherBody,
}

/// Claim `idempotency_key` for this key, action and body: `what` names
/// the action and what it acts on (`refund <order>`), so the same key sent
/// for another order's refund is another request, refused rather than
/// answered with the first one's answer.
pub async fn claim(
    pool: &PgPool,
    key: &ApiKey,
    idempotency_key: &str,
    what: &str,
    body: &[u8],
) -> sqlx::Result<Idempotent> {
    let request_hash = Sha256::new()
        .chain_update(what.as_bytes())
        .chain_update(b"\n")
        .chain_update(body)
        .finalize()
        .to_vec();
    let inserted = sqlx::query(
        "insert into api_idempotency (api_key_id, idempotency_key, request_hash) \
         values ($1, $2, $3) on conflict do nothing",
    )
    .bind(&key.id)
    .bind(idempotency_key)
    .bind(&request_hash)
    .execute(pool)
    .await?
    .rows_affected();
    if inserted == 1 {
        return Ok(Idempotent::Fresh);
    }
    /// What a claimed key already stands for.
    #[derive(sqlx::FromRow)]
    struct Claimed {
        request_hash: Vec<u8>,
        status: Option<i32>,
        response: Option<serde_json::Value>,
    }
    let claimed: Claimed = sqlx::query_as(
        "select request_hash, status, response from api_idempotency \
          where api_key_id = $1 and idempotency_key = $2",
    )
    .bind(&key.id)
    .bind(idempotency_key)
    .fetch_one(pool)
    .await?;
    Ok(if claimed.request_hash != request_hash {
        Idempotent::OtherBody
    } else {
        match (claimed.status, claimed.response) {
            (Some(status), Some(body)) => Idempotent::Answered {
                status: status as u16,
                body,
            },
            _ => Idempotent::Unanswered,
        }
    })
}

/// Keep the answer a claimed key got (a failure worth retrying is not
/// kept: [`forget`] it instead).
pub async fn answer(
    pool: &PgPool,
    key: &ApiKey,
    idempotency_key: &str,
    status: u16,
    body: &serde_json::Value,
) -> sqlx::Result<()> {
    sqlx::query(
        "update api_idempotency set status = $3, response = $4 \
          where api_key_id = $1 and idempotency_key = $2",
    )
    .bind(&key.id)
    .bind(idempotency_key)
    .bind(i32::from(status))
    .bind(body)
    .execute(pool)
    .await?;
    Ok(())
}

/// Let a claimed key be used again (its request failed in a way worth
/// another try).
pub async fn forget(pool: &PgPool, key: &ApiKey, idempotency_key: &str) -> sqlx::Result<()> {
    sqlx::query("delete from api_idempotency where api_key_id = $1 and idempotency_key = $2")
        .bind(&key.id)
        .bind(idempotency_key)
        .execute(pool)
        .await?;
    Ok(())
}
