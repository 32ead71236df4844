//! The page an invited member of staff lands on from their mail
//! (`/admin/invite/{token}`, outside the guard: they have no account yet):
//! they choose their own password and the account is made
//! (`crate::staff::invites`). The token in the address is the page's only
//! credential, so it is also what stops a forged form. A link expired,
//! used, cancelled or never sent gets a page that says so and changes
//! nothing.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;

use super::form::{Form, refusal};
use super::pages::{admin_message, render};
use crate::configuration::Secret;
use crate::routes::ShopError;
use crate::staff::StaffError;
use crate::staff::invites::{self, Accepted, Link};
use crate::state::Shop;

#[derive(Template)]
#[template(path = "admin/invite.html")]
struct InvitePage {
    email: String,
    role: &'static str,
    /// Why the password was refused, beside its field (never the
    /// password itself).
    form: Form,
}

/// The page for a link that does not work, or `None` when it does.
fn dead(link: &Link) -> Option<HttpResponse> {
    let (status, headline, why) = match link {
        Link::Open { .. } => return None,
        Link::Expired => (
            StatusCode::GONE,
            "This invite has expired",
            "An invite link works for 72 hours. Ask the owner who invited you to send it again; \
             nothing was changed.",
        ),
        Link::Spent => (
            StatusCode::GONE,
            "This invite link no longer works",
            "It was used already, cancelled, or replaced by a newer one. If you chose your \
             password, log in; otherwise ask the owner for a new invite. Nothing was changed.",
        ),
        Link::Unknown => (
            StatusCode::NOT_FOUND,
            "This is not an invite link",
            "Check that the whole address from the mail was opened, or ask the owner for a new \
             invite. Nothing was changed.",
        ),
    };
    Some(admin_message(status, headline, why))
}

/// `GET /admin/invite/{token}`.
pub async fn invite_page(
    shop: web::Data<Shop>,
    token: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let link = invites::look(&shop.pool, &Secret::new(token.into_inner())).await?;
    if let Some(page) = dead(&link) {
        return Ok(page);
    }
    let Link::Open { email, role } = link else {
        unreachable!("dead() answers every other link")
    };
    render(
        StatusCode::OK,
        &InvitePage {
            email,
            role: role.label(),
            form: Form::default(),
        },
    )
}

/// `POST /admin/invite/{token}`: fields `password` and `again`.
pub async fn accept(
    shop: web::Data<Shop>,
    token: web::Path<String>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, ShopError> {
    let token = Secret::new(token.into_inner());
    let mut form = Form::typed(form.into_inner());
    let password = Secret::new(form.value("password").to_owned());
    let again = Secret::new(form.value("again").to_owned());
    form.set("password", "");
    form.set("again", "");
    let link = invites::look(&shop.pool, &token).await?;
    if let Some(page) = dead(&link) {
        return Ok(page);
    }
    if password != again {
        form.fail("again", "The two passwords differ. Nothing was changed.");
    } else {
        match invites::accept(&shop.pool, &token, &password).await {
            Ok(Accepted::Created { .. }) => {
                let page = super::pages::MessagePage {
                    headline: "Your account is ready",
                    explanation: "Log in with your e-mail address and the password you chose.",
                    next_href: "/admin/login",
                    next_label: "Log in",
                };
                return render(StatusCode::OK, &page);
            }
            Ok(Accepted::Refused(link)) => {
                return Ok(dead(&link).unwrap_or_else(|| {
                    admin_message(StatusCode::CONFLICT, "Try again", "Nothing was changed.")
                }));
            }
            Err(StaffError::InvalidInput(message)) => form.fail("password", refusal(&message)),
            Err(other) => return Err(other.into()),
        }
    }
    let Link::Open { email, role } = link else {
        unreachable!("dead() answers every other link")
    };
    render(
        StatusCode::BAD_REQUEST,
        &InvitePage {
            email,
            role: role.label(),
            form,
        },
    )
}
