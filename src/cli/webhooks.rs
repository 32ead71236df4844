//! `holdfast webhooks add` and `holdfast webhooks list`: the endpoints the
//! admin's Webhooks page registers, for automation. The secret is printed
//! once, by `add`, and never again.

use std::process::ExitCode;

use super::{Ctx, cli_actor, print};
use crate::audit::Actor;
use crate::configuration::ServerSettings;
use crate::keys::SessionKey;
use crate::outgoing::{self, EventType, NewEndpoint};

#[derive(Debug, clap::Subcommand)]
pub(super) enum WebhookAction {
    /// Register an endpoint: prints its id and its secret (once)
    Add {
        /// Where to POST events (https://…)
        url: String,
        /// The events it hears, comma-separated (order.paid, order.refunded,
        /// order.expired, order.cancelled, code.redeemed, waitlist.offered,
        /// product.sold_out, product.available)
        #[arg(long)]
        events: String,
        /// Let this endpoint be on a private, loopback or link-local
        /// address, and in plain http://
        #[arg(long)]
        allow_private: bool,
    },
    /// Every endpoint: its events, whether it is on, its last attempt
    List,
}

pub(super) async fn run(ctx: &Ctx, action: WebhookAction) -> anyhow::Result<ExitCode> {
    match action {
        WebhookAction::Add {
            url,
            events,
            allow_private,
        } => add(ctx, url, events, allow_private).await,
        WebhookAction::List => list(ctx).await,
    }
}

async fn add(
    ctx: &Ctx,
    url: String,
    events: String,
    allow_private: bool,
) -> anyhow::Result<ExitCode> {
    let events = EventType::parse_list(&events).map_err(|e| anyhow::anyhow!("--events: {e}"))?;
    let server = ServerSettings::from_env()?;
    // the secret is sealed with the web processes' key: one made up here
    // would seal it for nobody
    let Some(key) = &server.session_key else {
        anyhow::bail!(
            "HOLDFAST_SESSION_KEY must be set (the same as the shop's): the endpoint's secret is \
             sealed with it"
        );
    };
    let key = SessionKey::new(key.clone())?;
    let actor = cli_actor();
    let added = outgoing::add_endpoint(
        &ctx.pool,
        &key,
        Actor::Operator(&actor),
        &NewEndpoint {
            url,
            events,
            allow_private: allow_private || server.webhooks_allow_private,
        },
    )
    .await?;
    print(ctx.json, &added, || {
        format!(
            "endpoint {}\nsecret   {}\n(the secret is shown this once: give it to the receiver now)",
            added.id, added.secret
        )
    });
    Ok(ExitCode::SUCCESS)
}

async fn list(ctx: &Ctx) -> anyhow::Result<ExitCode> {
    let endpoints = outgoing::endpoints(&ctx.pool).await?;
    print(ctx.json, &endpoints, || {
        if endpoints.is_empty() {
            return "no webhook endpoints".to_owned();
        }
        endpoints
            .iter()
            .map(|e| {
                let state = match &e.disabled_reason {
                    Some(why) => format!("disabled: {why}"),
                    None => "on".to_owned(),
                };
                let last = match (e.last_status, &e.last_error) {
                    (Some(status), _) => format!("last answer HTTP {status}"),
                    (None, Some(error)) => format!("last attempt: {error}"),
                    (None, None) => "no attempt yet".to_owned(),
                };
                format!(
                    "{}  {}  [{}]  {state}; {} pending; {last}",
                    e.id,
                    e.url,
                    e.events.join(","),
                    e.pending
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    Ok(ExitCode::SUCCESS)
}
