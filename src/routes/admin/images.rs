//! Uploading an image in the admin (issue 33): an event's, a schedule's, a
//! shelf's or a product's image, and the shop's logo ([`crate::images`]).
//! The form is `multipart/form-data` with the session's CSRF token, the
//! file (`image`), where to go back to (`back`) and, to take an image
//! down, `remove`. A refused file is answered with its field and the
//! reason beside it, and nothing is stored.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use futures::StreamExt;

use super::notices::NoticeQuery;
use super::pages::{Nav, nav, render, see_other};
use crate::images::{self, Refusal, Target};
use crate::routes::ShopError;
use crate::staff::Session;
use crate::state::Shop;

/// The most an upload form's body may carry: the largest image and the
/// few words around it. A larger body is refused before it is read.
pub const MAX_UPLOAD_BODY: usize = 2 * images::MAX_BYTES;

/// An image field as an admin page shows it: where it posts, the image
/// now, and why the last upload was refused.
#[derive(Debug, Clone, Default)]
pub struct ImageField {
    pub action: String,
    /// `/images/{id}/{width}` of the image now (empty: none).
    pub current: String,
    /// The page to come back to.
    pub back: String,
    pub error: String,
}

impl ImageField {
    /// The field for `target`, showing its image now.
    pub async fn of(shop: &Shop, target: Target<'_>, back: &str) -> sqlx::Result<Self> {
        Ok(Self {
            action: action(target),
            current: images::image_of(&shop.pool, target)
                .await?
                .map(|id| images::src(&id, images::THUMB_WIDTH))
                .unwrap_or_default(),
            back: back.to_owned(),
            error: String::new(),
        })
    }
}

/// Where a target's upload form posts.
fn action(target: Target<'_>) -> String {
    match target {
        Target::Collection(id) => format!("/admin/catalogue/collections/{id}/image"),
        Target::Product(id) => format!("/admin/catalogue/products/{id}/image"),
        Target::Logo => "/admin/settings/logo".to_owned(),
    }
}

#[derive(Template)]
#[template(path = "admin/image.html")]
struct ImagePage {
    nav: Nav,
    image: ImageField,
}

/// `POST /admin/catalogue/collections/{id}/image`.
pub async fn collection_image(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    request: HttpRequest,
    id: web::Path<String>,
    body: web::Payload,
) -> Result<HttpResponse, ShopError> {
    upload(&shop, &session, &request, Target::Collection(&id), body).await
}

/// `POST /admin/catalogue/products/{id}/image`.
pub async fn product_image(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    request: HttpRequest,
    id: web::Path<String>,
    body: web::Payload,
) -> Result<HttpResponse, ShopError> {
    upload(&shop, &session, &request, Target::Product(&id), body).await
}

/// `POST /admin/settings/logo`.
pub async fn logo(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    request: HttpRequest,
    body: web::Payload,
) -> Result<HttpResponse, ShopError> {
    upload(&shop, &session, &request, Target::Logo, body).await
}

async fn upload(
    shop: &Shop,
    session: &Session,
    request: &HttpRequest,
    target: Target<'_>,
    mut body: web::Payload,
) -> Result<HttpResponse, ShopError> {
    let mut bytes = web::BytesMut::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|_| crate::routes::bad_form())?;
        if bytes.len() + chunk.len() > MAX_UPLOAD_BODY {
            return Err(ShopError::too_large(
                "That upload is far larger than any image taken. Nothing was stored.",
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    let content_type = request
        .headers()
        .get(actix_web::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let parts = boundary(content_type)
        .map(|b| multipart_parts(&bytes, &b))
        .unwrap_or_default();
    let field = |name: &str| parts.iter().find(|p| p.name == name).map(|p| p.body);
    let back = field("back")
        .and_then(|b| std::str::from_utf8(b).ok())
        .filter(|b| safe_back(b))
        .unwrap_or("/admin")
        .to_owned();
    let checked = if field("remove").is_some() {
        None
    } else {
        match images::check(field("image").unwrap_or_default()) {
            Ok(checked) => Some(checked),
            Err(refusal) => return refused(shop, session, target, back, refusal).await,
        }
    };
    if !images::put_up(
        &shop.pool,
        (&session.staff).into(),
        target,
        checked.as_ref(),
    )
    .await?
    {
        return Err(ShopError::not_found(
            "There is nothing here to put an image on.",
        ));
    }
    if target == Target::Logo {
        shop.storefronts.forget();
    }
    let notice = if checked.is_some() {
        "image_saved"
    } else {
        "image_removed"
    };
    let (path, anchor) = back.split_once('#').unwrap_or((&back, "image"));
    let joiner = if path.contains('?') { '&' } else { '?' };
    Ok(see_other(&format!(
        "{path}{joiner}notice={notice}#{anchor}"
    )))
}

/// The field again, with why the file was refused beside it.
async fn refused(
    shop: &Shop,
    session: &Session,
    target: Target<'_>,
    back: String,
    refusal: Refusal,
) -> Result<HttpResponse, ShopError> {
    let mut image = ImageField::of(shop, target, &back).await?;
    image.error = refusal.words();
    let page = ImagePage {
        nav: nav(shop, session, &NoticeQuery::default()).await?,
        image,
    };
    render(StatusCode::BAD_REQUEST, &page)
}

/// A page of the admin to come back to, and nothing else.
fn safe_back(back: &str) -> bool {
    back.starts_with("/admin/") && !back.contains("//") && !back.contains('\\')
}

/// One part of a `multipart/form-data` body.
#[derive(Debug, PartialEq, Eq)]
pub struct Part<'a> {
    pub name: String,
    pub body: &'a [u8],
}

/// The boundary a `multipart/form-data` content type names.
pub fn boundary(content_type: &str) -> Option<String> {
    let (kind, rest) = content_type.split_once(';')?;
    if !kind.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    rest.split(';').find_map(|param| {
        let (key, value) = param.split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| value.trim().trim_matches('"').to_owned())
            .filter(|b| !b.is_empty() && b.len() <= 200)
    })
}

/// The named parts of a `multipart/form-data` body (RFC 7578); a part
/// without a name, or one cut short, is left out.
pub fn multipart_parts<'a>(body: &'a [u8], boundary: &str) -> Vec<Part<'a>> {
    let delimiter = format!("--{boundary}");
    let delimiter = delimiter.as_bytes();
    let mut parts = Vec::new();
    let mut at = match find(body, delimiter, 0) {
        Some(at) => at + delimiter.len(),
        None => return parts,
    };
    loop {
        if body[at..].starts_with(b"--") {
            break;
        }
        let Some(start) = body[at..].starts_with(b"\r\n").then_some(at + 2) else {
            break;
        };
        let Some(headers_end) = find(body, b"\r\n\r\n", start) else {
            break;
        };
        let Some(next) = find(body, &[b"\r\n", delimiter].concat(), headers_end + 4) else {
            break;
        };
        let headers = String::from_utf8_lossy(&body[start..headers_end]);
        if let Some(name) = part_name(&headers) {
            parts.push(Part {
                name,
                body: &body[headers_end + 4..next],
            });
        }
        at = next + 2 + delimiter.len();
    }
    parts
}

/// The `name` of a part's `Content-Disposition: form-data` header.
fn part_name(headers: &str) -> Option<String> {
    let disposition = headers.lines().find(|line| {
        line.to_ascii_lowercase()
            .starts_with("content-disposition:")
    })?;
    disposition.split(';').skip(1).find_map(|param| {
        let (key, value) = param.trim().split_once('=')?;
        (key == "name").then(|| value.trim_matches('"').to_owned())
    })
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > haystack.len() {
        return None;
    }
    haystack[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|at| at + from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_browsers_form_is_read_part_by_part() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\nabc\r\n\
--XyZ\r\nContent-Disposition: form-data; name=\"image\"; filename=\"a.png\"\r\n\
Content-Type: image/png\r\n\r\n\x89PNG\r\n--X\r\n--XyZ--\r\n";
        let parts = multipart_parts(body, "XyZ");
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].name, "csrf");
        assert_eq!(parts[0].body, b"abc");
        assert_eq!(parts[1].name, "image");
        assert_eq!(parts[1].body, b"\x89PNG\r\n--X");
        assert_eq!(
            boundary("multipart/form-data; boundary=\"XyZ\"").as_deref(),
            Some("XyZ")
        );
        assert_eq!(boundary("application/x-www-form-urlencoded"), None);
    }

    #[test]
    fn a_body_cut_short_gives_what_was_whole() {
        let body = b"--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--B\r\n\
Content-Disposition: form-data; name=\"b\"\r\n\r\n2";
        let parts = multipart_parts(body, "B");
        assert_eq!(parts.len(), 1);
        assert!(multipart_parts(b"", "B").is_empty());
    }

    #[test]
    fn only_admin_pages_are_come_back_to() {
        assert!(safe_back("/admin/catalogue/events/jazz"));
        assert!(!safe_back("https://elsewhere.example/admin/"));
        assert!(!safe_back("//elsewhere.example/admin/"));
        assert!(!safe_back("/admin//x"));
    }
}
