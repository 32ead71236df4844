//! The images staff upload (issue 33): one per event (or schedule, or
//! shelf) and per product, and the shop's logo, kept with the catalogue in
//! the database (migration 0103).
//!
//! An upload is checked by its content, never its name: its first bytes
//! must be a PNG's or a JPEG's ([`sniff`]), it is at most [`MAX_BYTES`],
//! and the dimensions its header declares are read before anything is
//! decoded, each side at most [`MAX_SIDE`] and all of it at most
//! [`MAX_PIXELS`], so a small file that would unpack into gigabytes is
//! refused unread. What passes is decoded and made smaller once, at
//! [`WIDTHS`], and stored with the original under its content's hash: its
//! address (`/images/{id}/{width}`, [`src`]) never changes, so browsers
//! may keep it for good.

use std::io::Cursor;

use image::{DynamicImage, ImageFormat, ImageReader, Limits};
use sha2::{Digest, Sha256};
use sqlx::PgPool;

use crate::audit::{self, Actor};

/// The largest file taken.
pub const MAX_BYTES: usize = 5 * 1024 * 1024;
/// The longest side taken, in pixels.
pub const MAX_SIDE: u32 = 6000;
/// The most pixels taken (a 6000 × 4000 photograph).
pub const MAX_PIXELS: u64 = 24_000_000;
/// The widths the pages ask for: a card's thumbnail, a card, a page.
pub const WIDTHS: [u32; 3] = [160, 480, 960];
/// The width the header and the mail show the logo at.
pub const LOGO_WIDTH: u32 = 160;
/// A catalogue card's image.
pub const CARD_WIDTH: u32 = 480;
/// An order line's image.
pub const THUMB_WIDTH: u32 = 160;

/// Why an upload was refused, in words shown beside its field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Empty,
    TooLarge,
    NotAnImage,
    TooManyPixels,
    Unreadable,
}

impl Refusal {
    /// The sentence shown beside the field.
    pub fn words(self) -> String {
        match self {
            Refusal::Empty => "Choose an image file to upload.".to_owned(),
            Refusal::TooLarge => format!(
                "That file is larger than {} MB. Make it smaller and try again.",
                MAX_BYTES / (1024 * 1024)
            ),
            Refusal::NotAnImage => {
                "That file is not a PNG or JPEG image (whatever its name says).".to_owned()
            }
            Refusal::TooManyPixels => format!(
                "That image is too large in pixels: at most {MAX_SIDE} pixels a side and {} \
                 megapixels in all.",
                MAX_PIXELS / 1_000_000
            ),
            Refusal::Unreadable => {
                "That image could not be read: it may be damaged or cut short.".to_owned()
            }
        }
    }
}

/// An upload that passed, with the smaller copies made of it.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The first 32 hex digits of the original's SHA-256.
    pub id: String,
    pub content_type: &'static str,
    pub width: u32,
    pub height: u32,
    pub bytes: Vec<u8>,
    pub variants: Vec<Variant>,
}

/// One stored copy of an image at one width.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Variant {
    pub width: i32,
    pub content_type: String,
    pub bytes: Vec<u8>,
}

/// The type a file's first bytes say it is: PNG or JPEG, nothing else.
pub fn sniff(bytes: &[u8]) -> Option<ImageFormat> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(ImageFormat::Png)
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some(ImageFormat::Jpeg)
    } else {
        None
    }
}

/// Check an upload by its content and make its smaller copies.
pub fn check(bytes: &[u8]) -> Result<Checked, Refusal> {
    if bytes.is_empty() {
        return Err(Refusal::Empty);
    }
    if bytes.len() > MAX_BYTES {
        return Err(Refusal::TooLarge);
    }
    let format = sniff(bytes).ok_or(Refusal::NotAnImage)?;
    let reader = || ImageReader::with_format(Cursor::new(bytes), format);
    let (width, height) = reader()
        .into_dimensions()
        .map_err(|_| Refusal::Unreadable)?;
    if width > MAX_SIDE || height > MAX_SIDE || u64::from(width) * u64::from(height) > MAX_PIXELS {
        return Err(Refusal::TooManyPixels);
    }
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_PIXELS * 8);
    let mut reader = reader();
    reader.limits(limits);
    let decoded = reader.decode().map_err(|_| Refusal::Unreadable)?;
    let content_type = match format {
        ImageFormat::Png => "image/png",
        _ => "image/jpeg",
    };
    let mut variants = Vec::new();
    for want in WIDTHS {
        let width = want.min(width);
        if variants.iter().any(|v: &Variant| v.width == width as i32) {
            continue;
        }
        variants.push(resized(&decoded, width, format).map_err(|_| Refusal::Unreadable)?);
    }
    let digest = Sha256::digest(bytes);
    Ok(Checked {
        id: hex::encode(&digest[..16]),
        content_type,
        width,
        height,
        bytes: bytes.to_vec(),
        variants,
    })
}

/// The picture `width` pixels wide, as a PNG (keeping transparency) when
/// it came as one, else as a JPEG.
fn resized(decoded: &DynamicImage, width: u32, format: ImageFormat) -> image::ImageResult<Variant> {
    let height =
        (u64::from(decoded.height()) * u64::from(width) / u64::from(decoded.width())).max(1) as u32;
    let small = if width == decoded.width() {
        decoded.clone()
    } else {
        decoded.resize_exact(width, height, image::imageops::FilterType::Triangle)
    };
    let mut out = Cursor::new(Vec::new());
    let content_type = if format == ImageFormat::Png {
        small.write_to(&mut out, ImageFormat::Png)?;
        "image/png"
    } else {
        let rgb = DynamicImage::ImageRgb8(small.to_rgb8());
        rgb.write_with_encoder(image::codecs::jpeg::JpegEncoder::new_with_quality(
            &mut out, 82,
        ))?;
        "image/jpeg"
    };
    Ok(Variant {
        width: width as i32,
        content_type: content_type.to_owned(),
        bytes: out.into_inner(),
    })
}

/// Where a page finds an image at (about) a width.
pub fn src(id: &str, width: u32) -> String {
    format!("/images/{id}/{width}")
}

/// What an image is put up on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// An event, schedule or shelf, by id.
    Collection(&'a str),
    /// A product (a tier, a slot, an item), by id.
    Product(&'a str),
    /// The shop's logo.
    Logo,
}

impl Target<'_> {
    fn describe(&self) -> String {
        match self {
            Target::Collection(id) => format!("collection {id}"),
            Target::Product(id) => format!("product {id}"),
            Target::Logo => "logo".to_owned(),
        }
    }
}

/// Store a checked image and put it up on `target` (`None`: take its image
/// down), recorded in Activity, in one transaction. `false`: there is no
/// such target, and nothing was stored.
pub async fn put_up(
    pool: &PgPool,
    by: Actor<'_>,
    target: Target<'_>,
    image: Option<&Checked>,
) -> sqlx::Result<bool> {
    let mut tx = pool.begin().await?;
    if let Some(image) = image {
        let stored = sqlx::query(
            "insert into images (id, content_type, width, height, bytes) \
             values ($1, $2, $3, $4, $5) on conflict (id) do nothing",
        )
        .bind(&image.id)
        .bind(image.content_type)
        .bind(image.width as i32)
        .bind(image.height as i32)
        .bind(&image.bytes)
        .execute(&mut *tx)
        .await?;
        if stored.rows_affected() == 1 {
            for variant in &image.variants {
                sqlx::query(
                    "insert into image_variants (image_id, width, content_type, bytes) \
                     values ($1, $2, $3, $4)",
                )
                .bind(&image.id)
                .bind(variant.width)
                .bind(&variant.content_type)
                .bind(&variant.bytes)
                .execute(&mut *tx)
                .await?;
            }
        }
    }
    let id = image.map(|i| i.id.as_str());
    let updated = match target {
        Target::Collection(collection) => {
            sqlx::query("update collections set image_id = $1 where id = $2")
                .bind(id)
                .bind(collection)
                .execute(&mut *tx)
                .await?
        }
        Target::Product(product) => {
            sqlx::query("update products set image_id = $1 where id = $2")
                .bind(id)
                .bind(product)
                .execute(&mut *tx)
                .await?
        }
        Target::Logo => {
            sqlx::query("update storefront set logo_id = $1, updated_at = now()")
                .bind(id)
                .execute(&mut *tx)
                .await?
        }
    };
    if updated.rows_affected() == 0 {
        return Ok(false);
    }
    let outcome = if image.is_some() { "saved" } else { "removed" };
    audit::commit(
        tx,
        by,
        "set_image",
        &target.describe(),
        outcome,
        serde_json::json!({ "image": id }),
    )
    .await?;
    Ok(true)
}

/// The image `target` shows now, if any.
pub async fn image_of(pool: &PgPool, target: Target<'_>) -> sqlx::Result<Option<String>> {
    let found: Option<Option<String>> = match target {
        Target::Collection(id) => {
            sqlx::query_scalar("select image_id from collections where id = $1")
                .bind(id)
                .fetch_optional(pool)
                .await?
        }
        Target::Product(id) => {
            sqlx::query_scalar("select image_id from products where id = $1")
                .bind(id)
                .fetch_optional(pool)
                .await?
        }
        Target::Logo => {
            sqlx::query_scalar("select logo_id from storefront")
                .fetch_optional(pool)
                .await?
        }
    };
    Ok(found.flatten())
}

/// A product's picture: its own, else its collection's.
#[derive(Debug, sqlx::FromRow)]
struct Picture {
    product_id: String,
    image_id: String,
}

/// The pictures of these products (its own image, else its collection's),
/// as addresses at `width`, by product id; a product without one is left
/// out.
pub async fn pictures_of(
    pool: &PgPool,
    products: &[String],
    width: u32,
) -> sqlx::Result<std::collections::HashMap<String, String>> {
    let found: Vec<Picture> = sqlx::query_as(
        "select p.id as product_id, coalesce(p.image_id, c.image_id) as image_id \
           from products p join collections c on c.id = p.collection \
          where p.id = any($1) and coalesce(p.image_id, c.image_id) is not null",
    )
    .bind(products)
    .fetch_all(pool)
    .await?;
    Ok(found
        .into_iter()
        .map(|p| (p.product_id, src(&p.image_id, width)))
        .collect())
}

/// The stored copy of an image that best fits `width`: the widest not
/// wider, else the narrowest.
pub async fn variant(pool: &PgPool, id: &str, width: i32) -> sqlx::Result<Option<Variant>> {
    sqlx::query_as(
        "select width, content_type, bytes from image_variants \
          where image_id = $1 \
          order by (width <= $2) desc, case when width <= $2 then -width else width end \
          limit 1",
    )
    .bind(id)
    .bind(width)
    .fetch_optional(pool)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let picture = image::RgbaImage::from_pixel(width, height, image::Rgba([200, 30, 30, 255]));
        let mut out = Cursor::new(Vec::new());
        DynamicImage::ImageRgba8(picture)
            .write_to(&mut out, ImageFormat::Png)
            .expect("encodes");
        out.into_inner()
    }

    #[test]
    fn a_png_is_taken_and_made_smaller_never_larger() {
        let checked = check(&png(600, 300)).expect("taken");
        assert_eq!((checked.width, checked.height), (600, 300));
        assert_eq!(checked.content_type, "image/png");
        let widths: Vec<i32> = checked.variants.iter().map(|v| v.width).collect();
        assert_eq!(widths, [160, 480, 600]);
        assert_eq!(checked.id.len(), 32);
    }

    #[test]
    fn the_content_decides_not_the_name() {
        assert_eq!(
            check(b"hello, I am text.png").unwrap_err(),
            Refusal::NotAnImage
        );
        assert_eq!(check(b"").unwrap_err(), Refusal::Empty);
        let mut cut = png(50, 50);
        cut.truncate(40);
        assert_eq!(check(&cut).unwrap_err(), Refusal::Unreadable);
    }

    #[test]
    fn too_many_pixels_is_refused_before_decoding() {
        assert_eq!(
            check(&png(MAX_SIDE + 1, 1)).unwrap_err(),
            Refusal::TooManyPixels
        );
        assert_eq!(check(&png(5000, 5000)).unwrap_err(), Refusal::TooManyPixels);
    }

    #[test]
    fn every_refusal_is_a_sentence() {
        for refusal in [
            Refusal::Empty,
            Refusal::TooLarge,
            Refusal::NotAnImage,
            Refusal::TooManyPixels,
            Refusal::Unreadable,
        ] {
            let words = refusal.words();
            assert!(words.starts_with(char::is_uppercase), "{words}");
            assert!(words.ends_with('.'), "{words}");
        }
    }
}
