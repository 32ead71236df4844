//! The shop is the owner's (issue 33): its name, a short description, its
//! accent colour, a contact address and links to its terms, privacy notice
//! and imprint. One row (`storefront`, migration 0101), set by an owner on
//! the admin's Settings page ([`save`], recorded in Activity) and shown on
//! every shopper's page: `templates/base.html` reads [`shown`], the copy
//! the request's middleware (`routes::edge::storefront`) put in place from
//! the shop's memory (`live::ShopSettings`, read with the stock and at
//! once after a save), or while memory may not be believed from
//! [`Storefronts`], a copy read again every few seconds; so a page costs no
//! query.
//!
//! The accent colour paints buttons with white text on them and links on
//! the page's pale background, so a colour is taken only when both read at
//! WCAG's AA contrast ([`MIN_CONTRAST`]).

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use sqlx::{PgExecutor, PgPool};

use crate::audit::{self, Actor};
use crate::clock::ShopZone;

tokio::task_local! {
    /// The shop as this request's pages show it.
    pub static SHOWN: Arc<Storefront>;
}

/// The shop as this request's pages show it (the default outside a
/// request, as in a test that renders a page by itself).
pub fn shown() -> Arc<Storefront> {
    SHOWN
        .try_with(Arc::clone)
        .unwrap_or_else(|_| Arc::new(Storefront::default()))
}

/// How long a copy in memory is used before it is read again: another
/// instance's save shows within this.
pub const FRESH_FOR: Duration = Duration::from_secs(5);

/// A copy of the shop in memory, with when it was read.
type Copy = Option<(Instant, Arc<Storefront>)>;

/// The shop in memory, read again when older than [`FRESH_FOR`].
#[derive(Debug, Clone, Default)]
pub struct Storefronts {
    copy: Arc<RwLock<Copy>>,
}

impl Storefronts {
    /// The shop now: the copy in memory while fresh, else read (a database
    /// that does not answer leaves the last copy, or the default, shown).
    pub async fn current(&self, pool: &PgPool) -> Arc<Storefront> {
        let last = self
            .copy
            .read()
            .map(|copy| copy.clone())
            .unwrap_or_default();
        if let Some((read_at, front)) = &last
            && read_at.elapsed() < FRESH_FOR
        {
            return Arc::clone(front);
        }
        match Storefront::read(pool).await {
            Ok(front) => {
                let front = Arc::new(front);
                if let Ok(mut copy) = self.copy.write() {
                    *copy = Some((Instant::now(), Arc::clone(&front)));
                }
                front
            }
            Err(error) => {
                tracing::warn!(%error, "reading the shop's name and colours");
                last.map(|(_, front)| front).unwrap_or_default()
            }
        }
    }

    /// The copy last read (the default before the first read), without
    /// reading.
    pub fn last(&self) -> Arc<Storefront> {
        self.copy
            .read()
            .ok()
            .and_then(|copy| copy.as_ref().map(|(_, front)| Arc::clone(front)))
            .unwrap_or_default()
    }

    /// Read again at the next page (after a save).
    pub fn forget(&self) {
        if let Ok(mut copy) = self.copy.write() {
            *copy = None;
        }
    }
}

/// The accent colour a shop starts with.
pub const DEFAULT_ACCENT: &str = "#0b6e4f";

/// The contrast (WCAG 2.1) the accent must keep with white text on it and
/// with the page's background behind it: AA for normal text.
pub const MIN_CONTRAST: f64 = 4.5;

/// The page's background (`static/shop.css`), which links sit on.
const PAGE_BACKGROUND: &str = "#fbfaf7";

/// The shop as its pages and mail show it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Storefront {
    pub name: String,
    pub description: String,
    /// `#rrggbb`, lower case.
    pub accent: String,
    pub contact_email: String,
    pub terms_url: String,
    pub privacy_url: String,
    pub imprint_url: String,
    /// Its logo, an image an owner uploaded ([`crate::images`]).
    pub logo_id: Option<String>,
    /// The zone the owner chose, an IANA name; empty: the server's.
    pub time_zone: String,
}

impl Default for Storefront {
    fn default() -> Self {
        Self {
            name: "Shop".into(),
            description: String::new(),
            accent: DEFAULT_ACCENT.into(),
            contact_email: String::new(),
            terms_url: String::new(),
            privacy_url: String::new(),
            imprint_url: String::new(),
            logo_id: None,
            time_zone: String::new(),
        }
    }
}

impl Storefront {
    /// The shop as it is stored now.
    pub async fn read<'e>(executor: impl PgExecutor<'e>) -> sqlx::Result<Self> {
        let found: Option<Self> = sqlx::query_as(
            "select name, description, accent, contact_email, terms_url, privacy_url, \
                    imprint_url, logo_id, time_zone \
               from storefront",
        )
        .fetch_optional(executor)
        .await?;
        Ok(found.unwrap_or_default())
    }

    /// The stylesheet that sets the accent: its address names the colour,
    /// so browsers keep it for good.
    pub fn theme_href(&self) -> String {
        format!("/static/theme/{}.css", self.accent.trim_start_matches('#'))
    }

    /// The zone the owner chose, or `default` (the server's) when none is
    /// chosen or the name is no longer in the IANA database this build
    /// carries.
    pub fn zone_or(&self, default: ShopZone) -> ShopZone {
        if self.time_zone.is_empty() {
            return default;
        }
        ShopZone::parse(&self.time_zone).unwrap_or(default)
    }

    /// Where the header finds the logo (`None`: the shop has none).
    pub fn logo_src(&self) -> Option<String> {
        self.logo_id
            .as_deref()
            .map(|id| crate::images::src(id, crate::images::LOGO_WIDTH))
    }

    /// As the Settings page's form shows it.
    pub fn as_edit(&self) -> StorefrontEdit {
        StorefrontEdit {
            name: self.name.clone(),
            description: self.description.clone(),
            accent: self.accent.clone(),
            contact_email: self.contact_email.clone(),
            terms_url: self.terms_url.clone(),
            privacy_url: self.privacy_url.clone(),
            imprint_url: self.imprint_url.clone(),
            time_zone: self.time_zone.clone(),
        }
    }

    /// What the footer links to: the contact address, then the legal
    /// links, as (words, address).
    pub fn contacts(&self) -> Vec<(String, String)> {
        let mut contacts = Vec::new();
        if !self.contact_email.is_empty() {
            contacts.push((
                self.contact_email.clone(),
                format!("mailto:{}", self.contact_email),
            ));
        }
        for (label, url) in self.links() {
            contacts.push((label.to_owned(), url.to_owned()));
        }
        contacts
    }

    /// The legal links the owner gave, as the footer names them.
    pub fn links(&self) -> Vec<(&'static str, &str)> {
        [
            ("Terms", self.terms_url.as_str()),
            ("Privacy", self.privacy_url.as_str()),
            ("Imprint", self.imprint_url.as_str()),
        ]
        .into_iter()
        .filter(|(_, url)| !url.is_empty())
        .collect()
    }
}

/// What an owner typed on the Settings page, as words.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default)]
pub struct StorefrontEdit {
    pub name: String,
    pub description: String,
    pub accent: String,
    pub contact_email: String,
    pub terms_url: String,
    pub privacy_url: String,
    pub imprint_url: String,
    pub time_zone: String,
}

/// A field of the edit that cannot be used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub field: &'static str,
    pub message: String,
}

impl StorefrontEdit {
    /// The edit as it would be stored, or every field that cannot be.
    pub fn check(&self) -> Result<StorefrontEdit, Vec<Refused>> {
        let mut refused = Vec::new();
        let mut refuse = |field: &'static str, message: String| {
            refused.push(Refused { field, message });
        };
        let clean = |text: &str| text.trim().to_owned();
        let edit = StorefrontEdit {
            name: clean(&self.name),
            description: clean(&self.description),
            accent: clean(&self.accent).to_ascii_lowercase(),
            contact_email: clean(&self.contact_email),
            terms_url: clean(&self.terms_url),
            privacy_url: clean(&self.privacy_url),
            imprint_url: clean(&self.imprint_url),
            time_zone: clean(&self.time_zone),
        };
        let count = |text: &str| text.chars().count();
        if edit.name.is_empty() {
            refuse("name", "The shop's name is needed".into());
        } else if count(&edit.name) > 100 || edit.name.chars().any(char::is_control) {
            refuse(
                "name",
                "The shop's name is one line of at most 100 characters".into(),
            );
        }
        if count(&edit.description) > 300 || edit.description.chars().any(char::is_control) {
            refuse(
                "description",
                "The description is one line of at most 300 characters".into(),
            );
        }
        if let Some(message) = contrast_problem(&edit.accent) {
            refuse("accent", message);
        }
        let plausible_email = edit.contact_email.is_empty()
            || (count(&edit.contact_email) <= 254
                && !edit.contact_email.chars().any(char::is_whitespace)
                && edit
                    .contact_email
                    .split_once('@')
                    .is_some_and(|(local, domain)| !local.is_empty() && domain.contains('.')));
        if !plausible_email {
            refuse(
                "contact_email",
                "The contact address is an e-mail address like hello@example.com".into(),
            );
        }
        for (field, label, url) in [
            ("terms_url", "The terms", &edit.terms_url),
            ("privacy_url", "The privacy notice", &edit.privacy_url),
            ("imprint_url", "The imprint", &edit.imprint_url),
        ] {
            let web = (url.starts_with("https://") || url.starts_with("http://"))
                && url.len() > "https://".len()
                && !url.chars().any(|c| c.is_whitespace() || c.is_control());
            if !url.is_empty() && (!web || url.len() > 500) {
                refuse(
                    field,
                    format!("{label} is a web address like https://example.com/terms"),
                );
            }
        }
        let mut edit = edit;
        if !edit.time_zone.is_empty() {
            match ShopZone::parse(&edit.time_zone) {
                // its canonical spelling: "europe/berlin" is Europe/Berlin
                Ok(zone) => edit.time_zone = zone.name().to_owned(),
                Err(_) => refuse(
                    "time_zone",
                    "The time zone is a name like Europe/Berlin or Asia/Kolkata".into(),
                ),
            }
        }
        if refused.is_empty() {
            Ok(edit)
        } else {
            Err(refused)
        }
    }
}

/// What saving came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Saved {
    Saved,
    /// Nothing was saved; each field says why.
    Refused(Vec<Refused>),
}

/// Save what an owner typed, recorded in Activity with the change, in one
/// transaction (`change_setting`).
pub async fn save(pool: &PgPool, by: Actor<'_>, edit: &StorefrontEdit) -> sqlx::Result<Saved> {
    let edit = match edit.check() {
        Ok(edit) => edit,
        Err(refused) => return Ok(Saved::Refused(refused)),
    };
    let mut tx = pool.begin().await?;
    sqlx::query(
        "update storefront set name = $1, description = $2, accent = $3, contact_email = $4, \
                terms_url = $5, privacy_url = $6, imprint_url = $7, time_zone = $8, \
                updated_at = now()",
    )
    .bind(&edit.name)
    .bind(&edit.description)
    .bind(&edit.accent)
    .bind(&edit.contact_email)
    .bind(&edit.terms_url)
    .bind(&edit.privacy_url)
    .bind(&edit.imprint_url)
    .bind(&edit.time_zone)
    .execute(&mut *tx)
    .await?;
    audit::commit(
        tx,
        by,
        "change_setting",
        "storefront",
        "saved",
        serde_json::json!({ "name": edit.name, "accent": edit.accent, "time_zone": edit.time_zone }),
    )
    .await?;
    Ok(Saved::Saved)
}

/// An accent colour as typed, `#rrggbb`: what is wrong with it, if
/// anything.
fn contrast_problem(accent: &str) -> Option<String> {
    let Some(colour) = rgb(accent) else {
        return Some(format!(
            "The accent colour is a colour like #0b6e4f, not {:?}",
            accent.chars().take(20).collect::<String>()
        ));
    };
    let white = [255, 255, 255];
    let background = rgb(PAGE_BACKGROUND).expect("a colour");
    let worst = contrast(colour, white).min(contrast(colour, background));
    (worst < MIN_CONTRAST).then(|| {
        format!(
            "The accent colour is too light: white text on it reads at {worst:.1}:1, and at \
             least {MIN_CONTRAST}:1 is needed. Choose a darker shade"
        )
    })
}

/// `#rrggbb` as its three channels.
fn rgb(hex: &str) -> Option<[u8; 3]> {
    let digits = hex.strip_prefix('#')?;
    if digits.len() != 6 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let channel = |i: usize| u8::from_str_radix(&digits[i..i + 2], 16).ok();
    Some([channel(0)?, channel(2)?, channel(4)?])
}

/// WCAG 2.1's contrast ratio of two colours, 1 to 21.
pub fn contrast(a: [u8; 3], b: [u8; 3]) -> f64 {
    let luminance = |c: [u8; 3]| {
        let linear = |v: u8| {
            let v = f64::from(v) / 255.0;
            if v <= 0.03928 {
                v / 12.92
            } else {
                ((v + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * linear(c[0]) + 0.7152 * linear(c[1]) + 0.0722 * linear(c[2])
    };
    let (la, lb) = (luminance(a), luminance(b));
    (la.max(lb) + 0.05) / (la.min(lb) + 0.05)
}

/// The stylesheet that sets an accent colour (`/static/theme/{rrggbb}.css`),
/// or `None` for anything but six hex digits.
pub fn theme_css(digits: &str) -> Option<String> {
    let accent = format!("#{}", digits.to_ascii_lowercase());
    rgb(&accent)?;
    Some(format!(":root {{ --accent: {accent}; }}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit() -> StorefrontEdit {
        StorefrontEdit {
            name: " Harbour Market ".into(),
            description: "Tickets and honey".into(),
            accent: "#0B6E4F".into(),
            contact_email: "hello@harbour.example".into(),
            terms_url: "https://harbour.example/terms".into(),
            privacy_url: String::new(),
            imprint_url: String::new(),
            time_zone: " asia/KOLKATA ".into(),
        }
    }

    #[test]
    fn a_good_edit_is_kept_trimmed_and_lower_case() {
        let checked = edit().check().unwrap();
        assert_eq!(checked.name, "Harbour Market");
        assert_eq!(checked.accent, "#0b6e4f");
        assert_eq!(checked.time_zone, "Asia/Kolkata");
    }

    #[test]
    fn each_bad_field_says_why() {
        let bad = StorefrontEdit {
            name: String::new(),
            accent: "#ffd700".into(),
            contact_email: "not an address".into(),
            terms_url: "javascript:alert(1)".into(),
            time_zone: "Europe/Atlantis".into(),
            ..edit()
        };
        let refused = bad.check().unwrap_err();
        let fields: Vec<&str> = refused.iter().map(|r| r.field).collect();
        assert_eq!(
            fields,
            ["name", "accent", "contact_email", "terms_url", "time_zone"]
        );
        assert!(refused[1].message.contains("too light"), "{refused:?}");
        assert!(
            StorefrontEdit {
                accent: "green".into(),
                ..edit()
            }
            .check()
            .unwrap_err()[0]
                .message
                .contains("like #0b6e4f")
        );
    }

    #[test]
    fn contrast_is_wcags() {
        assert!((contrast([0, 0, 0], [255, 255, 255]) - 21.0).abs() < 0.01);
        assert!((contrast([255, 255, 255], [255, 255, 255]) - 1.0).abs() < 0.01);
        // the default accent reads on white and on the page
        assert!(contrast_problem(DEFAULT_ACCENT).is_none());
        assert_eq!(
            theme_css("0B6E4F").unwrap(),
            ":root { --accent: #0b6e4f; }\n"
        );
        assert_eq!(theme_css("0b6e4"), None);
        assert_eq!(theme_css("zzzzzz"), None);
    }
}
