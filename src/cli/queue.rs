//! `holdfast queue on PRODUCT`, `holdfast queue draw PRODUCT` and
//! `holdfast queue verify PRODUCT [--url BASE]`: a product's drop queue
//! (`crate::queue`), and the check anyone can run that its order was fair.

use std::process::ExitCode;

use serde_json::json;

use super::{Ctx, cli_actor, print};
use crate::queue::{self, Published, QueueError};

#[derive(Debug, clap::Subcommand)]
pub(super) enum QueueAction {
    /// Turn a product's queue on before its sale opens: prints the
    /// commitment (SHA-256 of the seed) the product page publishes
    On { product: String },
    /// Draw a queue whose sale has opened now, rather than at the worker's
    /// next tick (exit 0 drawn, 4 not due or drawn already)
    Draw { product: String },
    /// Recompute the whole order from the published seed and list: exit 0
    /// when every position is the seed's, 1 when one is not
    Verify {
        product: String,
        /// Check what a shop publishes at BASE/queue/PRODUCT/order.json (any shop,
        /// over HTTPS) instead of this database's copy
        #[arg(long)]
        url: Option<String>,
    },
}

pub(super) async fn run(ctx: &Ctx, action: QueueAction) -> anyhow::Result<ExitCode> {
    match action {
        QueueAction::On { product } => match queue::turn_on(
            &ctx.pool,
            crate::audit::Actor::Operator(&cli_actor()),
            &product,
        )
        .await
        {
            Ok(commitment) => {
                print(
                    ctx.json,
                    &json!({ "product": product, "commitment": commitment }),
                    || {
                        format!(
                            "{product}'s queue is on; commitment (SHA-256 of the seed): {commitment}"
                        )
                    },
                );
                Ok(ExitCode::SUCCESS)
            }
            Err(QueueError::Refused(why)) => {
                eprintln!("holdfast: {why}; nothing was changed");
                Ok(ExitCode::from(2))
            }
            Err(QueueError::Database(error)) => Err(error.into()),
        },
        QueueAction::Draw { product } => {
            let started = std::time::Instant::now();
            let drawn = queue::draw(&ctx.pool, &product).await?;
            let took_ms = started.elapsed().as_secs_f64() * 1000.0;
            print(
                ctx.json,
                &json!({ "product": product, "drawn": drawn, "took_ms": took_ms }),
                || {
                    if drawn {
                        format!("{product}'s queue is drawn ({took_ms:.0} ms)")
                    } else {
                        format!(
                            "{product}'s queue is not due, or was drawn already; nothing changed"
                        )
                    }
                },
            );
            Ok(if drawn {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(4)
            })
        }
        QueueAction::Verify { product, url } => {
            let published: Published = match url {
                Some(base) => {
                    let url = format!("{}/queue/{product}/order.json", base.trim_end_matches('/'));
                    let answer = crate::payments::http::client(std::time::Duration::from_secs(30))
                        .get(&url)
                        .send()
                        .await?;
                    if !answer.status().is_success() {
                        anyhow::bail!("{url} answered {}", answer.status());
                    }
                    answer.json().await?
                }
                None => match queue::published(&ctx.pool, &product).await? {
                    Some(published) => published,
                    None => anyhow::bail!("{product} has no queue"),
                },
            };
            match queue::verify(&published) {
                Ok(positions) => {
                    print(
                        ctx.json,
                        &json!({ "product": product, "verified": positions, "seed": published.seed, "commitment": published.commitment }),
                        || {
                            format!(
                                "{product}: all {positions} positions are the seed's order, and the seed matches the commitment {}",
                                published.commitment
                            )
                        },
                    );
                    Ok(ExitCode::SUCCESS)
                }
                Err(why) => {
                    print(
                        ctx.json,
                        &json!({ "product": product, "error": why }),
                        || format!("{product}: NOT the seed's order: {why}"),
                    );
                    Ok(ExitCode::from(1))
                }
            }
        }
    }
}
