//! Every form of the admin refuses bad input on its own page: each POST
//! route of the route table is listed here with what it takes, and one
//! that takes typed input is sent something wrong. The answer must be the
//! admin's page (its menu, never the shop's error page) with the error
//! beside the field and what was typed kept, and nothing in the database
//! changed. A route added to the table without a case here fails the test.

use holdfast::routes::admin::{ROUTES, Verb};
use holdfast::staff::roles::Role;
use holdfast_testkit::engine::paid;
use holdfast_testkit::*;
use reqwest::StatusCode;

/// What a form takes, and so what bad input to it must answer.
enum Takes {
    /// Typed fields: sent `fields` (bad in one of them), the answer is the
    /// page with `status`, the element `error` (the message beside the
    /// field) and `typed` (the bad value, kept).
    Typed {
        fields: Vec<(&'static str, String)>,
        status: StatusCode,
        error: String,
        typed: &'static str,
    },
    /// A choice made by a button or a list (no text typed): a value not
    /// offered goes back to the admin's page saying so.
    Choice {
        fields: Vec<(&'static str, String)>,
        back: &'static str,
    },
    /// A secret (a sign-in code): never echoed; a wrong one goes back to
    /// the admin's page.
    Secret {
        fields: Vec<(&'static str, String)>,
        back: &'static str,
    },
    /// A thing picked by its id (a booking at the host stand): one that is
    /// not there goes back to the admin's page saying so.
    Picked {
        fields: Vec<(&'static str, String)>,
        back: &'static str,
    },
    /// A file (multipart): a bad file is refused beside its field, nothing
    /// stored, in `images::` (a text file named .png, too large, too many
    /// pixels, empty).
    Upload,
    /// Nothing but the CSRF token: a button that does one thing (its
    /// refusals are proved where the thing is).
    Button,
    /// Not the admin's own page: the door's (`/redeem`, the other
    /// engineer's).
    Door,
}

/// Rows of every table an admin form can change.
async fn fingerprint(app: &TestApp) -> Vec<String> {
    let mut prints = snapshot(&app.db.pool).await;
    prints.retain(|print| !print.starts_with("staff_sessions:"));
    for table in [
        "webhook_endpoints",
        "staff_invites",
        "api_keys",
        "waitlist_entries",
        "staff_settings",
        "storefront",
        "pay_methods",
        "images",
        "bookings",
        "walk_ins",
        "table_pins",
        "dining_rooms",
        "seats",
        "seat_sections",
        "seat_categories",
        "seating_settings",
    ] {
        let print: Option<String> = sqlx::query_scalar(&format!(
            "select '{table}:' || count(*) || ':' || \
                    coalesce(md5(string_agg(t::text, '|' order by t::text)), '') from {table} t"
        ))
        .fetch_one(&app.db.pool)
        .await
        .ok();
        prints.extend(print);
    }
    prints
}

fn typed(fields: &[(&'static str, &str)], error: &str, typed: &'static str) -> Takes {
    Takes::Typed {
        fields: fields.iter().map(|(n, v)| (*n, (*v).to_owned())).collect(),
        status: StatusCode::BAD_REQUEST,
        error: error.to_owned(),
        typed,
    }
}

/// What each POST route of the table takes, with the ids of the things
/// its path names.
fn case(path: &str, account: i64, endpoint: &str) -> Takes {
    let f = |name: &str| format!("id=\"f-{name}-error\"");
    match path {
        "/resources/{id}/capacity" => typed(&[("total", "lots")], &f("total"), "lots"),
        "/orders/{id}/refund" => typed(
            &[
                ("units:harbour-lights-vip", "many"),
                ("reason", "Typed reason 7Q"),
                ("step", "review"),
            ],
            "id=\"refund-mistakes\"",
            "Typed reason 7Q",
        ),
        "/staff" => typed(
            &[("email", "not-an-address"), ("role", "door")],
            &f("email"),
            "not-an-address",
        ),
        "/staff/{id}/role" => typed(
            &[("role", "emperor")],
            &format!("id=\"role-{account}-error\""),
            "Choose owner, box office or door",
        ),
        "/catalogue/events" => typed(
            &[
                ("id", "new-show"),
                ("title", "Typed title 7Q"),
                ("starts_at", "soonish"),
            ],
            &f("starts_at"),
            "Typed title 7Q",
        ),
        "/catalogue/events/{id}" => typed(
            &[("title", "Typed title 7Q"), ("starts_at", "soonish")],
            &f("starts_at"),
            "Typed title 7Q",
        ),
        "/catalogue/events/{id}/tiers" | "/catalogue/events/{id}/tiers/{tier}" => typed(
            &[
                ("id", "new-tier"),
                ("name", "Typed tier 7Q"),
                ("price", "12.00"),
                ("capacity", "lots"),
                ("max_per_order", "4"),
            ],
            &f("capacity"),
            "Typed tier 7Q",
        ),
        "/catalogue/schedules" | "/catalogue/schedules/{id}" => typed(
            &[
                ("id", "new-slots"),
                ("title", "Typed slots 7Q"),
                ("slot_minutes", "soon"),
            ],
            &f("slot_minutes"),
            "Typed slots 7Q",
        ),
        "/catalogue/stock" | "/catalogue/stock/{id}" => typed(
            &[
                ("id", "new-jar"),
                ("name", "Typed jar 7Q"),
                ("price", "free-ish"),
                ("capacity", "10"),
                ("max_per_order", "4"),
            ],
            &f("price"),
            "Typed jar 7Q",
        ),
        "/vouchers" => typed(
            &[
                ("code", "TYPED7Q"),
                ("discount", "percent"),
                ("percent", "lots"),
            ],
            &f("percent"),
            "TYPED7Q",
        ),
        "/waitlist/{product}/rules" => typed(
            &[("claim_minutes", "forever")],
            "id=\"rules-wild-honey-error\"",
            "forever",
        ),
        "/api-keys" => typed(
            &[("name", "Typed key 7Q"), ("scope", "everything")],
            &f("scope"),
            "Typed key 7Q",
        ),
        "/webhooks" => typed(
            &[("url", "ftp://typed.example/7Q"), ("event", "order.paid")],
            &f("url"),
            "ftp://typed.example/7Q",
        ),
        "/webhooks/{id}/replay" => {
            let _ = endpoint;
            typed(
                &[("since", "yesterday teatime")],
                &f("since"),
                "yesterday teatime",
            )
        }
        "/catalogue/events/{id}/sections/{section}/seats" => typed(
            &[("action", "block"), ("note", "Typed note 7Q")],
            &f("seats"),
            "Typed note 7Q",
        ),
        "/catalogue/events/{id}/sections/{section}/category" => {
            typed(&[("category", "boxes-7Q")], &f("category"), "boxes-7Q")
        }
        "/catalogue/events/{id}/sections/{section}/plan" => typed(
            &[
                ("row", "A"),
                ("first", "1"),
                ("last", "seven-7Q"),
                ("aisles", ""),
                ("wheelchair", ""),
                ("companion", ""),
            ],
            &f("rows"),
            "seven-7Q",
        ),
        "/catalogue/events/{id}/sections/{section}/categories/{category}" => typed(
            &[
                ("name", "Typed stalls 7Q"),
                ("colour", "#ffd700"),
                ("price", "45.00"),
            ],
            &f("cat-stalls-colour"),
            "Typed stalls 7Q",
        ),
        "/catalogue/events/{id}/sections/{section}/splits" => Takes::Choice {
            fields: vec![("splits", "sometimes".into())],
            back: "/admin/catalogue/events/winter-gala/sections/winter-gala-stalls?notice=splits_not_saved",
        },
        "/settings/shop" => typed(
            &[("name", ""), ("accent", "not-a-colour-7Q")],
            "id=\"shop-accent-error\"",
            "not-a-colour-7Q",
        ),
        "/catalogue/collections/{id}/move" => Takes::Choice {
            fields: vec![("to", "sideways".into())],
            back: "/admin/catalogue?notice=section_not_moved",
        },
        "/two-factor/confirm" | "/two-factor/recovery-codes" | "/two-factor/off" => Takes::Secret {
            fields: vec![("code", "not-a-code".into())],
            back: "/admin/two-factor",
        },
        "/redeem" => Takes::Door,
        "/settings/pay" => typed(
            &[("card", "carrier-pigeon")],
            "id=\"pay-card-error\"",
            "Choose a provider from the list.",
        ),
        // a room whose pacing is no number: said beside it, nothing made
        "/dining" | "/dining/{room}/setup" => typed(
            &[
                ("name", "Typed room 7Q"),
                ("interval", "30"),
                ("pacing", "lots"),
                ("table_id", "T1"),
                ("table_min", "1"),
                ("table_max", "4"),
            ],
            &f("pacing"),
            "Typed room 7Q",
        ),
        // a section at a category the event lacks; a colour too light
        "/catalogue/events/{id}/sections" => typed(
            &[
                ("name", "Typed section 7Q"),
                ("category", "boxes"),
                ("max_per_order", "8"),
                ("row", "A"),
                ("first", "1"),
                ("last", "10"),
                ("aisles", ""),
                ("wheelchair", ""),
                ("companion", ""),
            ],
            &f("category"),
            "Typed section 7Q",
        ),
        "/catalogue/events/{id}/categories" => typed(
            &[
                ("cat_name", "Typed category 7Q"),
                ("cat_price", "4.50"),
                ("cat_colour", "#ffd700"),
            ],
            &f("cat_colour"),
            "Typed category 7Q",
        ),
        "/dining/{room}/seat" | "/dining/{room}/no-show" | "/dining/{room}/move" => Takes::Picked {
            fields: vec![
                ("hold", "5f0c1c57-0000-4000-8000-00000000d1e5".into()),
                ("date", "2030-01-07".into()),
                ("to", "T99".into()),
            ],
            back: "/admin/dining/harbour-bistro?date=2030-01-07&said=not_standing",
        },
        // a party that is no number; a walk-in that is no one's
        "/dining/{room}/walk-in" => Takes::Picked {
            fields: vec![("party", "a dozen".into()), ("table", "T1".into())],
            back: "/admin/dining/harbour-bistro?said=walk_in_party#walk-ins",
        },
        "/dining/{room}/walk-in/left" => Takes::Picked {
            fields: vec![("walk_in", "5f0c1c57-0000-4000-8000-00000000d1e5".into())],
            back: "/admin/dining/harbour-bistro?said=walk_in_unknown#walk-ins",
        },
        "/settings/logo"
        | "/catalogue/collections/{id}/image"
        | "/catalogue/products/{id}/image" => Takes::Upload,
        "/logout"
        | "/resources/{id}/repair"
        | "/holds/{id}/release"
        | "/orders/{order}/jobs/{job}/retry"
        | "/staff/{id}/disable"
        | "/staff/{id}/enable"
        | "/staff/{id}/two-factor/reset"
        | "/staff/invites/{id}/resend"
        | "/staff/invites/{id}/cancel"
        | "/settings"
        | "/catalogue/products/{id}/archive"
        | "/catalogue/collections/{id}/publish"
        | "/catalogue/collections/{id}/unpublish"
        | "/catalogue/products/{id}/publish"
        | "/catalogue/products/{id}/unpublish"
        | "/catalogue/collections/{id}/archive"
        | "/catalogue/products/{id}/restore"
        | "/catalogue/collections/{id}/restore"
        | "/vouchers/{code}/archive"
        | "/vouchers/{code}/restore"
        | "/waitlist/{id}/remove"
        | "/waitlist/{product}/queue"
        | "/two-factor/start"
        | "/api-keys/{id}/revoke"
        | "/webhooks/{id}/enable"
        | "/webhooks/{id}/disable"
        | "/webhooks/{id}/deliveries/{job}/replay" => Takes::Button,
        other => panic!(
            "POST /admin{other} is in the route table but not here: say what its form takes \
             and prove what bad input to it answers"
        ),
    }
}

/// A route's path with the ids of this shop's things in it.
fn concrete(path: &str, order: &str, account: i64, endpoint: &str) -> String {
    path.replace("/resources/{id}", "/resources/wild-honey")
        .replace("/orders/{id}", &format!("/orders/{order}"))
        .replace("/staff/{id}", &format!("/staff/{account}"))
        .replace(
            "/events/{id}/sections/{section}",
            "/events/winter-gala/sections/winter-gala-stalls",
        )
        .replace("{category}", "stalls")
        .replace("/events/{id}", "/events/harbour-lights")
        .replace("{tier}", "harbour-lights-vip")
        .replace("/schedules/{id}", "/schedules/bread")
        .replace("/stock/{id}", "/stock/wild-honey")
        .replace("{product}", "wild-honey")
        .replace("/webhooks/{id}", &format!("/webhooks/{endpoint}"))
        .replace("{room}", "harbour-bistro")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_to_every_admin_form_is_said_on_its_own_page_and_changes_nothing() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    app.add_staff_as("door@holdfast.test", Role::Door).await;
    let account: i64 =
        sqlx::query_scalar("select id from staff where email = 'door@holdfast.test'")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    let order = paid(&app.db, "forms-1", &[("harbour-lights-vip", 2)]).await;
    let order = order.id.to_string();
    let endpoint = "ep_formsformsformsforms01";
    sqlx::query(
        "insert into webhook_endpoints (id, url, events, secret_sealed, created_by) \
         values ($1, 'https://hooks.example/in', array['order.paid'], \
                 decode(repeat('ab', 60), 'hex'), 'test')",
    )
    .bind(endpoint)
    .execute(&app.db.pool)
    .await
    .unwrap();
    let (staff, csrf) = app.staff_browser().await;
    // a pickup schedule to edit
    let made = app
        .admin_post(
            &staff,
            "/admin/catalogue/schedules",
            &[
                ("csrf", &csrf),
                ("title", "Bread pickup"),
                ("id", "bread"),
                ("name", "Rye loaf"),
                ("price", "6.50"),
                ("capacity", "4"),
                ("max_per_order", "2"),
                ("weekday", "1"),
                ("opens", "08:00"),
                ("closes", "09:00"),
                ("slot_minutes", "30"),
                ("days_ahead", "2"),
            ],
        )
        .await;
    assert_eq!(made.status(), StatusCode::SEE_OTHER);
    let before = fingerprint(&app).await;

    let mut typed_forms = 0;
    for route in ROUTES.iter().filter(|route| route.verb == Verb::Post) {
        let path = format!("/admin{}", concrete(route.path, &order, account, endpoint));
        let with_csrf = |fields: &[(&'static str, String)]| {
            let mut form = vec![("csrf", csrf.clone())];
            form.extend(fields.iter().cloned());
            form
        };
        match case(route.path, account, endpoint) {
            Takes::Typed {
                fields,
                status,
                error,
                typed,
            } => {
                let answer = staff
                    .post(format!("{}{path}", app.address))
                    .form(&with_csrf(&fields))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(answer.status(), status, "{path}");
                let page = answer.text().await.unwrap();
                assert!(
                    page.contains("class=\"admin-nav menu\""),
                    "{path}: the admin's own page, not the shop's error page: {page}"
                );
                assert!(
                    page.contains(&error),
                    "{path}: {error} beside the field: {page}"
                );
                assert!(page.contains(typed), "{path}: {typed:?} kept: {page}");
                typed_forms += 1;
            }
            Takes::Choice { fields, back } | Takes::Secret { fields, back } => {
                let answer = staff
                    .post(format!("{}{path}", app.address))
                    .form(&with_csrf(&fields))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(answer.status(), StatusCode::SEE_OTHER, "{path}");
                let to = location(&answer);
                assert!(to.starts_with(back), "{path} went to {to}");
                let page = app.admin_page(&staff, &to).await;
                assert!(page.contains("class=\"admin-nav menu\""), "{path}");
                for (_, value) in &fields {
                    assert!(
                        !page.contains(value.as_str()),
                        "{path}: {value} never echoed"
                    );
                }
            }
            Takes::Picked { fields, back } => {
                let answer = staff
                    .post(format!("{}{path}", app.address))
                    .form(&with_csrf(&fields))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(answer.status(), StatusCode::SEE_OTHER, "{path}");
                let to = location(&answer);
                assert_eq!(to, back, "{path}");
                let page = app.admin_page(&staff, &to).await;
                assert!(page.contains("class=\"admin-nav menu\""), "{path}");
            }
            Takes::Button | Takes::Door | Takes::Upload => {}
        }
        assert_eq!(fingerprint(&app).await, before, "{path} changed something");
    }
    assert_eq!(
        typed_forms, 27,
        "every form with typed fields was sent bad input"
    );
}
