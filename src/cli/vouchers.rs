//! `holdfast voucher add` and `holdfast voucher list`: the same vouchers the
//! admin makes, for automation.

use std::process::ExitCode;

use super::{Ctx, cli_actor, print};
use crate::catalogue::moment;
use crate::vouchers::{self, Created, Discount, NewVoucher};

/// `holdfast voucher add`'s arguments.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("discount").args(["percent", "amount_off"])))]
pub(super) struct AddArgs {
    /// The code shoppers type (letters, digits and -, 3 to 40; case does
    /// not matter)
    pub code: String,
    /// Percent off each line it applies to (1 to 100)
    #[arg(long)]
    pub percent: Option<i32>,
    /// An amount off, in minor units (cents): off the order's lines it
    /// applies to, or with --per-unit off each unit
    #[arg(long)]
    pub amount_off: Option<i64>,
    /// Take --amount-off off each unit rather than once per order
    #[arg(long, requires = "amount_off")]
    pub per_unit: bool,
    /// The currency of --amount-off (default: the shop's)
    #[arg(long, requires = "amount_off")]
    pub currency: Option<String>,
    /// How many orders may use it
    #[arg(long)]
    pub uses: i64,
    /// The products it applies to, comma-separated (default: every product)
    #[arg(long, value_delimiter = ',')]
    pub products: Vec<String>,
    /// One use per buyer (their e-mail address, normalised)
    #[arg(long)]
    pub per_buyer: bool,
    /// Valid from this moment (ISO 8601 with an offset)
    #[arg(long)]
    pub from: Option<String>,
    /// Valid until this moment (ISO 8601 with an offset)
    #[arg(long)]
    pub until: Option<String>,
    /// Hidden products it unlocks, comma-separated (a presale's access code)
    #[arg(long, value_delimiter = ',')]
    pub unlocks: Vec<String>,
}

pub(super) async fn add(ctx: &Ctx, args: AddArgs) -> anyhow::Result<ExitCode> {
    let voucher = NewVoucher {
        code: args.code,
        percent_off: args.percent,
        amount_off_minor: args.amount_off,
        per_unit: args.per_unit,
        currency: args.currency.map(|c| c.trim().to_ascii_lowercase()),
        uses: args.uses,
        products: (!args.products.is_empty()).then_some(args.products),
        unlocks: args.unlocks,
        valid_from: args
            .from
            .as_deref()
            .map(|t| moment("--from", t))
            .transpose()?,
        valid_until: args
            .until
            .as_deref()
            .map(|t| moment("--until", t))
            .transpose()?,
        per_buyer: args.per_buyer,
    };
    // every refusal in words before the database is asked
    voucher.check()?;
    let currency = match (&voucher.currency, voucher.amount_off_minor) {
        (Some(c), _) => c.clone(),
        (None, None) => String::new(),
        (None, Some(_)) => crate::staff::catalogue::catalogue_currency(&ctx.pool)
            .await?
            .ok_or_else(|| {
                anyhow::anyhow!("the shop sells nothing yet: give --currency for an amount off")
            })?,
    };
    let outcome = vouchers::create(&ctx.pool, &voucher, &currency, &cli_actor()).await?;
    print(ctx.json, &outcome, || match &outcome {
        Created::Created { code } => format!("{code}: created, {} uses", voucher.uses),
        Created::Exists { code } => format!("{code}: exists already, left as it is"),
        Created::UnknownProducts { ids } => {
            format!("no such products: {}; nothing created", ids.join(", "))
        }
    });
    Ok(match outcome {
        Created::Created { .. } | Created::Exists { .. } => ExitCode::SUCCESS,
        Created::UnknownProducts { .. } => ExitCode::FAILURE,
    })
}

pub(super) async fn list(ctx: &Ctx) -> anyhow::Result<ExitCode> {
    let all = vouchers::list(&ctx.pool).await?;
    print(ctx.json, &all, || {
        if all.is_empty() {
            return "no vouchers".to_owned();
        }
        all.iter()
            .map(|v| {
                let off = match v.discount {
                    Discount::None => "access code".to_owned(),
                    Discount::Percent { percent } => format!("{percent}% off"),
                    Discount::PerOrder { minor } => format!(
                        "{} off the order",
                        crate::money::format(minor, v.currency.as_deref().unwrap_or(""))
                    ),
                    Discount::PerUnit { minor } => format!(
                        "{} off each unit",
                        crate::money::format(minor, v.currency.as_deref().unwrap_or(""))
                    ),
                };
                let archived = if v.archived { ", archived" } else { "" };
                format!(
                    "{}: {off}; {} of {} used, {} held, {} left{archived}",
                    v.code,
                    v.used,
                    v.uses,
                    v.held,
                    (v.uses - v.used - v.held).max(0)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    Ok(ExitCode::SUCCESS)
}
