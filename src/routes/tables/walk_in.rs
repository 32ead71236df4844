//! Walk-ins at the host stand (issue 46): a party with no booking seated
//! now on a free table, claimed by the same pins and constraint as a
//! booking (`hf_walk_in`, migration 0260), and its table freed when it
//! leaves (`hf_walk_in_left`).

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use uuid::Uuid;

use crate::routes::ShopError;
use crate::routes::admin::pages::see_other;
use crate::staff::Session;
use crate::state::Shop;

#[derive(Deserialize)]
pub struct WalkInForm {
    /// The party's size, as typed.
    party: String,
    #[serde(default)]
    name: String,
    /// A table or joined set; empty: the best free one.
    #[serde(default)]
    table: String,
    /// The walk-in's own id, made when the page was drawn: the same form
    /// sent again seats nobody twice. Absent (a form from before), a new one.
    #[serde(default)]
    once: Option<Uuid>,
}

/// Back to today, saying what happened.
fn back(room: &str, said: &str) -> HttpResponse {
    see_other(&format!("/admin/dining/{room}?said={said}#walk-ins"))
}

/// `POST /admin/dining/{room}/walk-in`: seat a party now, at the table
/// chosen or the best free one; the database decides under its locks.
pub async fn walk_in(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    room: web::Path<String>,
    form: web::Form<WalkInForm>,
) -> Result<HttpResponse, ShopError> {
    let Some(party) = form
        .party
        .trim()
        .parse::<i32>()
        .ok()
        .filter(|p| (1..=100).contains(p))
    else {
        return Ok(back(&room, "walk_in_party"));
    };
    let name: String = form.name.trim().chars().take(200).collect();
    let table = form.table.trim();
    let answer: serde_json::Value =
        sqlx::query_scalar("select hf_walk_in($1, $2, nullif($3, ''), $4, $5, now(), $6)")
            .bind(room.as_str())
            .bind(party)
            .bind(table)
            .bind(&name)
            .bind(&session.staff.email)
            .bind(form.once)
            .fetch_one(&shop.pool)
            .await?;
    let said = match answer["outcome"].as_str().unwrap_or_default() {
        "seated" => "walked_in",
        "unknown_room" => return Err(ShopError::not_found("no such dining room")),
        "not_free" => "walk_in_not_free",
        "unknown_set" => "walk_in_no_such_table",
        "does_not_fit" => "walk_in_too_small",
        "not_ours" => "walk_in_unknown",
        _ => "none_free",
    };
    Ok(back(&room, said))
}

#[derive(Deserialize)]
pub struct LeftForm {
    walk_in: Uuid,
}

/// `POST /admin/dining/{room}/walk-in/left`: the party left; its table is
/// free from now.
pub async fn left(
    shop: web::Data<Shop>,
    room: web::Path<String>,
    form: web::Form<LeftForm>,
) -> Result<HttpResponse, ShopError> {
    let answer: String = sqlx::query_scalar("select hf_walk_in_left($1, $2, now())")
        .bind(room.as_str())
        .bind(form.walk_in)
        .fetch_one(&shop.pool)
        .await?;
    Ok(back(
        &room,
        match answer.as_str() {
            "left" => "left",
            "left_before" => "left_before",
            _ => "walk_in_unknown",
        },
    ))
}
