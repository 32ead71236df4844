//! `holdfast api-keys add`, `list` and `revoke`: the keys the admin's API
//! keys page makes, for automation, through the same use cases
//! (`staff::api_keys`), recorded in Activity as the command line. The
//! token is printed once, by `add`, and never again: `list` shows what a
//! key is and how it is used, not what it signs with.

use std::process::ExitCode;

use serde::Serialize;

use super::{Ctx, cli_actor, print};
use crate::audit::Actor;
use crate::staff::api_keys::{self, ApiKeyRow, Named, Scope};

#[derive(Debug, clap::Subcommand)]
pub(super) enum ApiKeyAction {
    /// Make a key: prints its id and its token (once)
    Add {
        /// Who it is for, as Activity names it (1 to 100 characters; no
        /// other live key's name)
        name: String,
        /// What it may do, comma-separated (read_catalogue, start_checkouts,
        /// read_orders, refund, redeem, manage_vouchers, export)
        #[arg(long)]
        scopes: String,
    },
    /// Every key: name, scopes, made when and by whom, last used, revoked
    List,
    /// Revoke a key by its id, or by the name of one live key: it signs
    /// nothing from then on
    Revoke {
        /// The key's id, or its name
        key: String,
    },
}

pub(super) async fn run(ctx: &Ctx, action: ApiKeyAction) -> anyhow::Result<ExitCode> {
    match action {
        ApiKeyAction::Add { name, scopes } => add(ctx, name, scopes).await,
        ApiKeyAction::List => list(ctx).await,
        ApiKeyAction::Revoke { key } => revoke(ctx, key).await,
    }
}

/// A key just made, with its token: what `add` prints, this once.
#[derive(Serialize)]
struct Made {
    #[serde(flatten)]
    key: ApiKeyRow,
    token: String,
}

async fn add(ctx: &Ctx, name: String, scopes: String) -> anyhow::Result<ExitCode> {
    let scopes = Scope::parse_list(&scopes).map_err(|e| anyhow::anyhow!("--scopes: {e}"))?;
    // the command line names keys by name too: one live key a name
    let taken = api_keys::list(&ctx.pool)
        .await?
        .into_iter()
        .find(|key| key.revoked_at.is_none() && key.name == name.trim());
    if let Some(live) = taken {
        anyhow::bail!(
            "a live key is named {:?} already ({}): name this one apart, or revoke that one \
             first; nothing was changed",
            live.name,
            live.id
        );
    }
    let actor = cli_actor();
    let (key, token) = api_keys::create(&ctx.pool, Actor::Operator(&actor), &name, &scopes).await?;
    let made = Made { key, token };
    print(ctx.json, &made, || {
        format!(
            "key    {} ({})\nscopes {}\ntoken  {}\n(the token is shown this once: give it to the \
             system that signs with it now)",
            made.key.id,
            made.key.name,
            made.key.scopes.join(", "),
            made.token
        )
    });
    Ok(ExitCode::SUCCESS)
}

async fn list(ctx: &Ctx) -> anyhow::Result<ExitCode> {
    let keys = api_keys::list(&ctx.pool).await?;
    print(ctx.json, &keys, || {
        if keys.is_empty() {
            return "no API keys".to_owned();
        }
        keys.iter().map(line).collect::<Vec<_>>().join("\n")
    });
    Ok(ExitCode::SUCCESS)
}

/// One key as `list` prints it: never its token.
fn line(key: &ApiKeyRow) -> String {
    let stamp = |at: chrono::DateTime<chrono::Utc>| at.format("%Y-%m-%d %H:%M:%S UTC").to_string();
    let used = key.last_used_at.map_or_else(
        || "never used".to_owned(),
        |at| format!("last used {}", stamp(at)),
    );
    let state = match (key.revoked_at, &key.revoked_by) {
        (Some(at), by) => format!(
            "revoked {} by {}",
            stamp(at),
            by.as_deref().unwrap_or("someone")
        ),
        (None, _) => "live".to_owned(),
    };
    format!(
        "{}  {}  [{}]  made {} by {}; {used}; {state}",
        key.id,
        key.name,
        key.scopes.join(","),
        stamp(key.created_at),
        key.created_by
    )
}

/// What `revoke` did.
#[derive(Serialize)]
struct Revoked {
    id: String,
    name: String,
    /// False when it was revoked already (nothing changed).
    revoked: bool,
}

async fn revoke(ctx: &Ctx, id_or_name: String) -> anyhow::Result<ExitCode> {
    let key = match api_keys::named(&ctx.pool, &id_or_name).await? {
        Named::Key(key) => key,
        Named::Nobody => anyhow::bail!(
            "no key has the id {:?}, and no live key that name; nothing was changed",
            id_or_name.chars().take(100).collect::<String>()
        ),
        Named::Several(ids) => anyhow::bail!(
            "{} live keys are named {:?} ({}): revoke one by its id; nothing was changed",
            ids.len(),
            id_or_name,
            ids.join(", ")
        ),
    };
    let actor = cli_actor();
    let revoked = api_keys::revoke(&ctx.pool, Actor::Operator(&actor), &key.id).await?;
    let answer = Revoked {
        id: key.id,
        name: key.name,
        revoked,
    };
    print(ctx.json, &answer, || {
        if answer.revoked {
            format!(
                "key {} ({}) revoked: it signs nothing from now on",
                answer.id, answer.name
            )
        } else {
            format!(
                "key {} ({}) was revoked already; nothing was changed",
                answer.id, answer.name
            )
        }
    });
    Ok(ExitCode::SUCCESS)
}
