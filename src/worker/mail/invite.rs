//! The mail inviting a member of staff: who invites them, to which role,
//! and the link to choose their own password (`crate::staff::invites`),
//! with until when it works. Sent only while the invite is open and the
//! token is still its own: a cancelled or re-sent invite's old mail is
//! dropped.

use askama::Template;
use chrono::{DateTime, Utc};
use lettre::message::MultiPart;
use sha2::{Digest, Sha256};
use sqlx::PgPool;

use super::{MailError, Mailer, render, text};
use crate::configuration::Secret;
use crate::staff::roles::Role;

#[derive(Template)]
#[template(path = "mail/staff_invite.html")]
struct Invite {
    invited_by: String,
    shop: String,
    role: &'static str,
    link: String,
    until: String,
}

#[derive(Template)]
#[template(path = "mail/staff_invite.txt")]
struct InviteText<'a>(&'a Invite);

impl std::ops::Deref for InviteText<'_> {
    type Target = Invite;
    fn deref(&self) -> &Invite {
        self.0
    }
}

#[derive(sqlx::FromRow)]
struct Open {
    email: String,
    role: Role,
    invited_by: String,
    expires_at: DateTime<Utc>,
}

impl Mailer {
    /// An invite's mail, if the invite is open and `token` is its link's.
    pub async fn staff_invite(
        &self,
        pool: &PgPool,
        invite_id: i64,
        token: &Secret,
    ) -> Result<(), MailError> {
        self.storefronts.current(pool).await;
        let hash = Sha256::digest(token.expose().as_bytes()).to_vec();
        let open: Option<Open> = sqlx::query_as(
            "select email, role, invited_by, expires_at from staff_invites \
              where id = $1 and token_sha256 = $2 and used_at is null and cancelled_at is null",
        )
        .bind(invite_id)
        .bind(&hash)
        .fetch_optional(pool)
        .await?;
        let Some(open) = open else {
            tracing::info!(invite = invite_id, "staff invite not sent: no longer open");
            return Ok(());
        };
        let mail = Invite {
            invited_by: open.invited_by,
            shop: self.storefronts.last().name.clone(),
            role: open.role.label(),
            link: format!("{}/admin/invite/{}", self.base_url, token.expose()),
            until: self.zone(pool).await.minute(open.expires_at),
        };
        let (text, html) = (text(&InviteText(&mail))?, render(&mail)?);
        let id = format!("staff-invite-{invite_id}-{}", &hex::encode(&hash)[..16]);
        let message = self
            .builder("", &open.email, &id)?
            .subject(format!("You are invited to the admin of {}", mail.shop))
            .multipart(MultiPart::alternative_plain_html(text, html))
            .map_err(|e| MailError::Compose(e.to_string()))?;
        self.send(message).await
    }
}
