//! Exports: the filter form, orders and attendees as streamed CSV, and the
//! door's printable list. The queries and the CSV are `staff::exports`'.
//!
//! A filter that cannot be read answers the page it was sent from again,
//! with what was wrong said above the form and the form as it was sent
//! (400; 404 for a product or collection the shop does not have): nothing
//! is exported, nothing recorded.

use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;

use super::notices::NoticeQuery;
use super::pages::{Nav, nav, no_store, render};
use crate::audit::Actor;
use crate::checkout::OrderState;
use crate::routes::ShopError;
use crate::staff::Session;
use crate::staff::exports::{
    self, AttendeeLine, CollectionChoice, Csv, CsvExport, DOOR_LIST_LIMIT, DoorList, ExportError,
    ExportFilter, FilterForm, ProductChoice,
};
use crate::state::Shop;

/// An export refused for its filter or for too many at once: said on the
/// page, with its status. Anything else is the shop's error.
enum Refusal {
    Said(StatusCode, String),
    Failed(ShopError),
}

impl From<ExportError> for Refusal {
    fn from(error: ExportError) -> Self {
        match error {
            ExportError::InvalidInput(message) => Refusal::Said(StatusCode::BAD_REQUEST, message),
            ExportError::NotFound(message) => Refusal::Said(StatusCode::NOT_FOUND, message),
            ExportError::Busy => Refusal::Said(
                StatusCode::SERVICE_UNAVAILABLE,
                "Other exports are being downloaded right now. Try again when one has finished."
                    .to_owned(),
            ),
            ExportError::Database(error) => Refusal::Failed(error.into()),
        }
    }
}

impl From<sqlx::Error> for Refusal {
    fn from(error: sqlx::Error) -> Self {
        Refusal::Failed(error.into())
    }
}

/// What the filter form shows: the shop's collections and products, the
/// order states, and what was sent (kept when it is sent back).
struct FilterChoices {
    collections: Vec<CollectionChoice>,
    /// Each state's value and words, for the filter.
    states: Vec<(&'static str, &'static str)>,
    form: FilterForm,
    zone: crate::clock::ShopZone,
}

impl FilterChoices {
    async fn read(shop: &Shop, form: FilterForm) -> Result<Self, ShopError> {
        Ok(Self {
            collections: exports::choices(&shop.pool).await?,
            states: OrderState::ALL
                .iter()
                .map(|s| (s.as_str(), s.words()))
                .collect(),
            form,
            zone: shop.zone(),
        })
    }

    /// "Harbour Lights — VIP — Wed 16 Dec 19:30 CET", "Sourdough box,
    /// pickup Tue 1 Dec 12:30 CET (archived)": the name, and when it starts
    /// unless the name says so already (a slot's does).
    fn label(&self, product: &ProductChoice) -> String {
        let mut label = product.name.clone();
        if let Some(at) = product.starts_at {
            let when = self.zone.short(at);
            if !label.contains(&when) {
                label.push_str(&format!(" — {when}"));
            }
        }
        if !product.active {
            label.push_str(" (archived)");
        }
        label
    }

    /// "Harbour Lights (archived)"
    fn title(&self, collection: &CollectionChoice) -> String {
        if collection.archived {
            format!("{} (archived)", collection.title)
        } else {
            collection.title.clone()
        }
    }

    /// The collections whose products carry codes: the door lists to offer.
    fn door_collections(&self) -> Vec<&CollectionChoice> {
        self.collections.iter().filter(|c| c.has_codes()).collect()
    }

    fn picked(value: &Option<String>, choice: &str) -> bool {
        value.as_deref().map(str::trim) == Some(choice)
    }

    fn collection_picked(&self, id: &str) -> bool {
        Self::picked(&self.form.collection, id)
    }

    fn product_picked(&self, id: &str) -> bool {
        Self::picked(&self.form.product, id)
    }

    fn state_picked(&self, state: &str) -> bool {
        Self::picked(&self.form.state, state)
    }

    /// A date field as it was sent.
    fn value(&self, field: &str) -> &str {
        let form = &self.form;
        let value = match field {
            "paid_from" => &form.paid_from,
            "paid_to" => &form.paid_to,
            "starts_from" => &form.starts_from,
            "starts_to" => &form.starts_to,
            _ => &None,
        };
        value.as_deref().unwrap_or("")
    }
}

#[derive(Template)]
#[template(path = "admin/exports.html")]
pub(super) struct ExportsPage {
    nav: Nav,
    choices: FilterChoices,
    /// What was wrong with the filter, if it was refused.
    error: Option<String>,
}

async fn exports_page_with(
    shop: &Shop,
    session: &Session,
    form: FilterForm,
    status: StatusCode,
    error: Option<String>,
) -> Result<HttpResponse, ShopError> {
    let page = ExportsPage {
        nav: nav(shop, session, &NoticeQuery::default()).await?,
        choices: FilterChoices::read(shop, form).await?,
        error,
    };
    render(status, &page)
}

/// `GET /admin/exports`: the filter form.
pub async fn exports_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
) -> Result<HttpResponse, ShopError> {
    exports_page_with(&shop, &session, FilterForm::default(), StatusCode::OK, None).await
}

/// A CSV on its way: an attachment named for its filter, streamed.
fn download(export: CsvExport) -> HttpResponse {
    let mut response = HttpResponse::Ok()
        .content_type("text/csv; charset=utf-8")
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{}\"", export.filename),
        ))
        .streaming(export.body);
    no_store(&mut response);
    response
}

async fn csv(
    shop: &Shop,
    session: &Session,
    request: &HttpRequest,
    what: Csv,
) -> Result<HttpResponse, ShopError> {
    let form = FilterForm::from_query(request.query_string());
    let exported = async {
        let filter = ExportFilter::parse(&form)?;
        let by = Actor::from(&session.staff);
        exports::export_csv(&shop.pool, &shop.exports, by, &filter, shop.zone(), what).await
    };
    match exported.await.map_err(Refusal::from) {
        Ok(export) => Ok(download(export)),
        Err(Refusal::Said(status, message)) => {
            exports_page_with(shop, session, form, status, Some(message)).await
        }
        Err(Refusal::Failed(error)) => Err(error),
    }
}

/// `GET /admin/exports/orders.csv?…`: one line per order.
pub async fn orders_csv(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    request: HttpRequest,
) -> Result<HttpResponse, ShopError> {
    csv(&shop, &session, &request, Csv::Orders).await
}

/// `GET /admin/exports/attendees.csv?…`: one line per ticket or pickup code.
pub async fn attendees_csv(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    request: HttpRequest,
) -> Result<HttpResponse, ShopError> {
    csv(&shop, &session, &request, Csv::Attendees).await
}

/// The door's lists to choose from: every slot and event whose units carry
/// codes.
#[derive(Template)]
#[template(path = "admin/door_lists.html")]
pub(super) struct DoorListsPage {
    nav: Nav,
    choices: FilterChoices,
    error: Option<String>,
}

#[derive(Template)]
#[template(path = "admin/door.html")]
pub(super) struct DoorPage {
    nav: Nav,
    /// What the list is of: "Harbour Lights — VIP — Mon 14 Dec …".
    title: String,
    filter: String,
    /// `None`: more codes than a list shows.
    codes: Option<Vec<AttendeeLine>>,
    redeemed: usize,
    refunded: usize,
    limit: usize,
    printed_at: String,
    /// Whether the member may take the attendees as CSV: the too-many
    /// note offers it only then.
    may_export: bool,
}

/// `GET /admin/door-list`: the lists to choose from; `?product=…` (or
/// `collection=…`, with the starts days to narrow a bakery to a day): the
/// door's list of it, by name, to print and tick off.
pub async fn door_list(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    request: HttpRequest,
) -> Result<HttpResponse, ShopError> {
    let form = FilterForm::from_query(request.query_string());
    let chooser = |form: FilterForm, status: StatusCode, error: Option<String>| {
        let (shop, session) = (&shop, &session);
        async move {
            let page = DoorListsPage {
                nav: nav(shop, session, &NoticeQuery::default()).await?,
                choices: FilterChoices::read(shop, form).await?,
                error,
            };
            render(status, &page)
        }
    };
    if !form.sent() {
        return chooser(form, StatusCode::OK, None).await;
    }
    let listed = async {
        let filter = ExportFilter::parse(&form)?;
        let list = exports::door_list(&shop.pool, &session.staff, &filter, shop.zone()).await?;
        let title = exports::sale_title(&shop.pool, &filter, shop.zone()).await?;
        Ok::<_, Refusal>((filter, list, title))
    };
    let (filter, list, title) = match listed.await {
        Ok(listed) => listed,
        Err(Refusal::Said(status, message)) => return chooser(form, status, Some(message)).await,
        Err(Refusal::Failed(error)) => return Err(error),
    };
    let (codes, redeemed, refunded) = match list {
        DoorList::Listed {
            codes,
            redeemed,
            refunded,
        } => (Some(codes), redeemed, refunded),
        DoorList::TooMany => (None, 0, 0),
    };
    let page = DoorPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        title,
        filter: filter.words(),
        codes,
        redeemed,
        refunded,
        limit: DOOR_LIST_LIMIT,
        printed_at: shop.zone().minute(chrono::Utc::now()),
        may_export: session
            .staff
            .role
            .may(crate::staff::roles::Permission::Exports),
    };
    render(StatusCode::OK, &page)
}

impl DoorPage {
    /// "19:02 CET at North door by grace@…"
    fn redeemed_words(&self, code: &AttendeeLine) -> String {
        let Some(at) = code.redeemed_at else {
            return String::new();
        };
        let mut words = self.nav.zone.time(at);
        if let Some(place) = code.place.as_deref().filter(|p| !p.is_empty()) {
            words.push_str(&format!(" at {place}"));
        }
        if let Some(by) = &code.redeemed_by {
            words.push_str(&format!(" by {by}"));
        }
        words
    }
}
