//! Seating an event from the admin (docs/admin.md, "Seated sections"):
//! the page that adds a price category (a name, a price, a colour that
//! reads on the map) and a section (a name, its category, the most seats
//! an order takes, and its plan filled in a line of fields a row, drawn
//! as it is typed). Thin handlers: each reads its form (errors beside
//! their fields), calls `staff::seats`, and answers with a redirect, or
//! the page again with what refused it (nothing written).

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;

use crate::catalogue::edit::{CollectionEdit, DEFAULT_MAX_PER_ORDER, ProductEdit};
use crate::catalogue::kinds::{CollectionKind, ProductKind};
use crate::catalogue::seats::admin::{self, CategoryInfo};
use crate::catalogue::seats::{self, RowFields};
use crate::routes::ShopError;
use crate::routes::admin::NoticeQuery;
use crate::routes::admin::catalogue::{Fields, new_id_in, segment};
use crate::routes::admin::form::Form;
use crate::routes::admin::pages::{Nav, money, nav, render, see_other};
use crate::staff::Session;
use crate::staff::catalogue;
use crate::staff::seats::{self as staffed, SectionAdded};
use crate::state::Shop;

/// The map's background (`static/shop.css`'s page): a category's colour
/// keeps [`crate::storefront::MIN_CONTRAST`] with it and with the white
/// marks drawn on a seat.
const MAP_BACKGROUND: [u8; 3] = [0xfb, 0xfa, 0xf7];

/// Blank lines a new section's plan starts with.
const NEW_ROWS: usize = 3;

#[derive(Template)]
#[template(path = "seats/new_section.html")]
struct NewSectionPage {
    nav: Nav,
    form: Form,
    event: CollectionEdit,
    /// The event's categories, each with its price in words.
    categories: Vec<(CategoryInfo, String)>,
    plan_rows: Vec<RowFields>,
}

impl NewSectionPage {
    fn base(&self) -> String {
        format!("/admin/catalogue/events/{}", segment(&self.event.id))
    }

    /// The colour the plan's drawing gives a seat: the chosen category's.
    fn colour(&self) -> &str {
        self.categories
            .iter()
            .find(|(c, _)| c.id == self.form.value("category"))
            .or(self.categories.first())
            .map_or("#2f6f4f", |(c, _)| c.colour.as_str())
    }

    /// Whether the plan's line `line` is ticked to be taken out.
    fn out(&self, line: &usize) -> bool {
        self.form.has("out", &line.to_string())
    }
}

async fn event_of(shop: &Shop, id: &str) -> Result<CollectionEdit, ShopError> {
    catalogue::collection(&shop.pool, id, CollectionKind::Event)
        .await?
        .ok_or_else(|| ShopError::not_found("no such event"))
}

async fn page(
    shop: &Shop,
    session: &Session,
    notice: &NoticeQuery,
    event: CollectionEdit,
    form: Form,
) -> Result<NewSectionPage, ShopError> {
    let currency = crate::catalogue::shop_currency(&shop.pool).await?;
    let categories = admin::categories(&shop.pool, &event.id)
        .await?
        .into_iter()
        .map(|c| {
            let price = money(c.price_minor, &currency);
            (c, price)
        })
        .collect();
    let mut plan_rows = rows_of(&form).unwrap_or_default();
    let spare = NEW_ROWS.saturating_sub(plan_rows.len()).max(1);
    plan_rows.extend(std::iter::repeat_n(RowFields::default(), spare));
    Ok(NewSectionPage {
        nav: nav(shop, session, notice).await?,
        form,
        event,
        categories,
        plan_rows,
    })
}

/// `GET /admin/catalogue/events/{id}/sections/new`.
pub async fn new_section(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let event = event_of(&shop, &id).await?;
    let mut form = Form::default();
    form.set("max_per_order", DEFAULT_MAX_PER_ORDER.to_string());
    form.set("cat_colour", "#2f6f4f");
    render(
        StatusCode::OK,
        &page(&shop, &session, &notice, event, form).await?,
    )
}

/// `POST /admin/catalogue/events/{id}/categories` (fields `cat_name`,
/// `cat_id`, `cat_price`, `cat_colour`): a new price category.
pub async fn add_category(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    let event = event_of(&shop, &id).await?;
    let mut form = Form::typed(fields.into_inner());
    let name = form.text("cat_name", "The category's name", 100, true);
    let category = new_id_in(&mut form, "cat_id", &name, "");
    let colour = form.value("cat_colour").trim().to_ascii_lowercase();
    if let Some(problem) = colour_problem(&colour) {
        form.fail("cat_colour", problem);
    }
    let price_minor = form.money("cat_price", "The price");
    let mut status = StatusCode::BAD_REQUEST;
    if let (Some(price_minor), true) = (price_minor, form.ok()) {
        let added = CategoryInfo {
            id: category.clone(),
            name,
            colour,
            price_minor,
        };
        if staffed::add_category(&shop.pool, &session.staff, &event.id, &added).await? {
            return Ok(see_other(&format!(
                "/admin/catalogue/events/{}/sections/new?notice=category_added#section",
                segment(&event.id)
            )));
        }
        form.fail(
            "cat_id",
            format!("The event has a category {category:?} already: give another id or name"),
        );
        status = StatusCode::CONFLICT;
    }
    let page = page(&shop, &session, &NoticeQuery::default(), event, form).await?;
    render(status, &page)
}

/// `POST /admin/catalogue/events/{id}/sections` (fields `name`, `id`,
/// `category`, `max_per_order`, and the plan's fields a row): a new
/// seated section, its seats on sale at its category's price.
pub async fn create_section(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    let event = event_of(&shop, &id).await?;
    let mut form = Form::typed(fields.into_inner());
    let name = form.text("name", "The section's name", 100, true);
    let section = new_id_in(&mut form, "id", &name, &event.id);
    if section == "new" {
        form.fail(
            "id",
            "\"new\" is the address of this page: give another id or name",
        );
    }
    let categories = admin::categories(&shop.pool, &event.id).await?;
    let category = categories
        .iter()
        .find(|c| c.id == form.value("category"))
        .cloned();
    if category.is_none() {
        form.fail(
            "category",
            "Choose one of the event's categories (add one above first)",
        );
    }
    let max_per_order = form.whole("max_per_order", "The most seats an order takes", 1, 100);
    let rows = kept_rows(&form).and_then(|kept| {
        let specs = seats::row_specs(&kept)?;
        Ok((seats::fielded_rows(&kept)?, specs))
    });
    let rows = match rows {
        Ok(rows) => Some(rows),
        Err(words) => {
            form.fail("rows", format!("{words}. Nothing was changed."));
            None
        }
    };
    let mut status = StatusCode::BAD_REQUEST;
    if let (Some(category), Some(max_per_order), Some((rows, specs)), true) =
        (category, max_per_order, rows, form.ok())
    {
        let seats: i64 = specs
            .iter()
            .map(|r| i64::from(r.seats[1] - r.seats[0] + 1))
            .sum();
        let product = ProductEdit {
            id: section.clone(),
            collection: event.id.clone(),
            kind: ProductKind::Seat,
            name: name.clone(),
            description: String::new(),
            price_minor: category.price_minor,
            currency: crate::catalogue::shop_currency(&shop.pool).await?,
            capacity: seats,
            starts_at: event.starts_at,
            ends_at: event.ends_at,
            max_per_order: max_per_order as i32,
            sale_opens_at: None,
            sale_closes_at: None,
            hidden: false,
            position: None,
        };
        match staffed::add_section(&shop.pool, &session.staff, &product, &category.id, &rows).await
        {
            Ok(SectionAdded::Added) => {
                return Ok(see_other(&format!(
                    "/admin/catalogue/events/{}/sections/{}?notice=section_added",
                    segment(&event.id),
                    segment(&section)
                )));
            }
            Ok(SectionAdded::Taken) => {
                form.fail(
                    "id",
                    format!(
                        "The id {section:?} belongs to something the shop has (or had: archived \
                         things keep their ids). Give another id or name. Nothing was changed."
                    ),
                );
                status = StatusCode::CONFLICT;
            }
            Err(crate::staff::StaffError::InvalidInput(words)) => {
                form.fail("", crate::routes::admin::form::refusal(&words));
            }
            Err(other) => return Err(other.into()),
        }
    }
    // the plan's lines as typed, the boxes ticked kept
    let page = page(&shop, &session, &NoticeQuery::default(), event, form).await?;
    render(status, &page)
}

/// The fields of one row of the plan, in the order the page gives them.
pub(crate) const ROW_PARTS: [&str; 6] =
    ["row", "first", "last", "aisles", "wheelchair", "companion"];

pub(super) fn row_parts(row: &RowFields) -> [&str; 6] {
    [
        &row.row,
        &row.first,
        &row.last,
        &row.aisles,
        &row.wheelchair,
        &row.companion,
    ]
}

/// The plan's rows as the form gives them: each of a row's fields once a
/// row, in order. Refused when the parts do not line up (a form not the
/// page's) or there are more than a plan may hold.
pub(crate) fn rows_of(form: &Form) -> Result<Vec<RowFields>, String> {
    let parts: Vec<Vec<&str>> = ROW_PARTS.iter().map(|name| form.all(name)).collect();
    let count = parts[0].len();
    if parts.iter().any(|p| p.len() != count) || count > 2000 {
        return Err("The plan's fields did not arrive whole: load the page again".into());
    }
    if parts.iter().flatten().any(|v| v.chars().count() > 200) {
        return Err("A field of the plan is at most 200 characters".into());
    }
    Ok((0..count)
        .map(|i| RowFields {
            row: parts[0][i].to_owned(),
            first: parts[1][i].to_owned(),
            last: parts[2][i].to_owned(),
            aisles: parts[3][i].to_owned(),
            wheelchair: parts[4][i].to_owned(),
            companion: parts[5][i].to_owned(),
        })
        .collect())
}

/// The plan's rows as the form gives them, those ticked out left blank
/// (so each keeps the line number the page shows).
pub(crate) fn kept_rows(form: &Form) -> Result<Vec<RowFields>, String> {
    Ok(rows_of(form)?
        .into_iter()
        .enumerate()
        .map(|(i, row)| {
            if form.has("out", &i.to_string()) {
                RowFields::default()
            } else {
                row
            }
        })
        .collect())
}

/// What is wrong with a category's colour, typed: not a colour, or one
/// that does not keep 4.5:1 with the map's background and the white marks
/// on a seat.
pub(super) fn colour_problem(colour: &str) -> Option<String> {
    let digits = colour
        .strip_prefix('#')
        .filter(|d| d.len() == 6 && d.bytes().all(|b| b.is_ascii_hexdigit()));
    let Some(digits) = digits else {
        return Some(format!(
            "The colour is written like #1f5f8b, not {:?}",
            colour.chars().take(20).collect::<String>()
        ));
    };
    let channel = |i: usize| u8::from_str_radix(&digits[i..i + 2], 16).unwrap_or(0);
    let rgb = [channel(0), channel(2), channel(4)];
    let worst = crate::storefront::contrast(rgb, MAP_BACKGROUND)
        .min(crate::storefront::contrast(rgb, [255, 255, 255]));
    (worst < crate::storefront::MIN_CONTRAST).then(|| {
        format!(
            "The colour is too light: seats in it read at {worst:.1}:1 on the map, and at least \
             {}:1 is needed. Choose a darker shade",
            crate::storefront::MIN_CONTRAST
        )
    })
}
