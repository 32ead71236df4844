//! After the sale: refunds and redemptions from the command line.

use std::process::ExitCode;

use super::{Ctx, RefundArgs, cli_actor, print};

/// `holdfast refund ORDER`: refund a paid order, whole or some units (exit 6 refused, 7 no such order).
pub(super) async fn refund(ctx: &Ctx, request: RefundArgs) -> anyhow::Result<ExitCode> {
    use crate::staff::refunds::{self, RefundOutcome, RefundRequest};
    let RefundArgs {
        order_id,
        units,
        reason,
        keep_off_sale,
        override_redeemed,
        key,
    } = request;
    let order_id = uuid::Uuid::parse_str(order_id.trim())
        .map_err(|_| anyhow::anyhow!("{order_id:?} is not an order id"))?;
    let mut wanted = Vec::new();
    for item in &units {
        let (product, n) = match item.rsplit_once(':') {
            Some((product, n)) => (Some(product.to_owned()), n),
            None => (None, item.as_str()),
        };
        let n: i32 = n
            .trim()
            .parse()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| anyhow::anyhow!("--units {item:?}: a number of at least 1"))?;
        wanted.push((product, n));
    }
    if wanted.iter().any(|(p, _)| p.is_none()) {
        if wanted.len() > 1 {
            anyhow::bail!("--units N names one line; with several, give PRODUCT:N each");
        }
        let lines = crate::staff::views::refundable_lines(&ctx.pool, order_id).await?;
        match lines.as_slice() {
            [] => anyhow::bail!("no order {order_id}"),
            [line] => wanted[0].0 = Some(line.product_id.clone()),
            _ => anyhow::bail!(
                "order {order_id} has several lines ({}); say which: --units PRODUCT:N",
                lines
                    .iter()
                    .map(|l| l.product_id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
    let request = RefundRequest {
        order_id,
        units: wanted
            .into_iter()
            .map(|(p, n)| (p.unwrap_or_default(), n))
            .collect(),
        reason,
        restock: !keep_off_sale,
        override_redeemed,
        by: cli_actor(),
        staff: None,
        key,
    };
    let outcome = refunds::refund_order(&ctx.pool, &request)
        .await
        .map_err(|error| anyhow::anyhow!("{error}"))?;
    print(ctx.json, &outcome, || match &outcome {
        RefundOutcome::Queued {
            refund_id,
            amount_minor,
            currency,
            units,
            whole,
        } => format!(
            "refund #{refund_id} queued: {} for {units} unit(s){}",
            crate::money::format(*amount_minor, currency),
            if *whole { ", the whole order" } else { "" }
        ),
        RefundOutcome::NotPaid { state } => {
            format!("refused: the order is {}, not paid", state.as_str())
        }
        RefundOutcome::NothingLeft => "refused: everything was refunded already".into(),
        RefundOutcome::NotInOrder { product_id } => {
            format!("refused: the order has no {product_id}")
        }
        RefundOutcome::TooMany {
            product_id,
            asked,
            left,
        } => format!("refused: {asked} of {product_id} asked, {left} left to refund"),
        RefundOutcome::Redeemed { codes } => format!(
            "refused: already redeemed: {} (--override-redeemed to refund anyway)",
            codes.join(", ")
        ),
        RefundOutcome::NotFound => format!("no order {order_id}"),
    });
    Ok(match outcome {
        RefundOutcome::Queued { .. } => ExitCode::SUCCESS,
        RefundOutcome::NotFound => ExitCode::from(7),
        _ => ExitCode::from(6),
    })
}

/// `holdfast redeem CODE`: redeem once (exit 0 admitted or collected; 5 already used, 6 refunded, 7 not valid or not paid).
pub(super) async fn redeem(ctx: &Ctx, code: String, place: String) -> anyhow::Result<ExitCode> {
    let zone = crate::configuration::shop_zone(&ctx.pool).await?;
    let by = cli_actor();
    let place = place.trim();
    let door = crate::redemption::Door {
        by: &by,
        place,
        attempt: uuid::Uuid::new_v4(),
        checks: None,
        overrule: false,
    };
    let redeemed = crate::retry::retry("redeem", crate::retry::Bound::Shopper, || {
        crate::redemption::redeem(&ctx.pool, &code, &door)
    })
    .await
    .map_err(|error| match error {
        sqlx::Error::Database(e) if e.code().as_deref() == Some("22023") => {
            anyhow::anyhow!("{}", e.message())
        }
        other => other.into(),
    })?;
    let outcome = &redeemed.outcome;
    print(
        ctx.json,
        &serde_json::json!({
            "code": redeemed.code,
            "outcome": outcome.as_str(),
            "order_id": redeemed.order_id,
            "customer": redeemed.customer_name,
            "what": redeemed.what,
            "used_at": match outcome {
                crate::redemption::Outcome::AlreadyUsed { at, .. } => Some(at),
                _ => None,
            },
        }),
        || redemption_text(&redeemed, zone),
    );
    Ok(match outcome {
        crate::redemption::Outcome::Redeemed { .. } => ExitCode::SUCCESS,
        crate::redemption::Outcome::AlreadyUsed { .. } => ExitCode::from(5),
        crate::redemption::Outcome::Refunded | crate::redemption::Outcome::Cancelled => {
            ExitCode::from(6)
        }
        crate::redemption::Outcome::NotValid | crate::redemption::Outcome::NotPaid => {
            ExitCode::from(7)
        }
        // the command line names no door: any code is its own
        crate::redemption::Outcome::NotThisDoor => ExitCode::from(8),
    })
}

/// One redemption, as staff at a door read it.
pub(super) fn redemption_text(
    redeemed: &crate::redemption::Redemption,
    zone: crate::clock::ShopZone,
) -> String {
    use crate::redemption::Outcome;
    let who = redeemed.customer_name.as_deref().unwrap_or("");
    let what = redeemed.what.as_deref().unwrap_or("");
    match &redeemed.outcome {
        Outcome::Redeemed { word } => format!("{}: {word} — {what} ({who})", redeemed.code),
        Outcome::AlreadyUsed { at, by, place } => format!(
            "{}: already used at {} by {by}{}",
            redeemed.code,
            zone.stamp(*at),
            if place.is_empty() {
                String::new()
            } else {
                format!(" ({place})")
            }
        ),
        Outcome::Refunded => format!("{}: refunded — not valid for entry", redeemed.code),
        Outcome::Cancelled => format!("{}: cancelled — not valid for entry", redeemed.code),
        Outcome::NotPaid => format!("{}: not paid — {what}", redeemed.code),
        Outcome::NotThisDoor => format!(
            "{}: not this door — {}",
            redeemed.code,
            redeemed
                .made_for
                .as_ref()
                .map_or(String::new(), |made_for| made_for.describe(zone))
        ),
        Outcome::NotValid => format!("{}: not valid", redeemed.code),
    }
}
