//! Staff accounts with roles: `holdfast staff add --role` and `holdfast
//! staff list`, the owner's Staff page (owners only), changing roles,
//! disabling an account (its sessions end, its row stays), a lost second
//! factor reset, and the rule that the shop always keeps an active owner.

use futures::future::join_all;
use holdfast::staff::roles::Role;
use reqwest::StatusCode;
use reqwest::header::ACCEPT;

use crate::cli::holdfast_with_stdin;
use crate::two_factor::{BOX_OFFICE_EMAIL, DOOR_EMAIL, enrol};
use holdfast_testkit::*;

async fn role_of(app_pool: &sqlx::PgPool, email: &str) -> String {
    sqlx::query_scalar("select role from staff where email = $1")
        .bind(email)
        .fetch_one(app_pool)
        .await
        .unwrap()
}

async fn id_of(pool: &sqlx::PgPool, email: &str) -> i64 {
    sqlx::query_scalar("select id from staff where email = $1")
        .bind(email)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_adds_accounts_with_roles_and_lists_them() {
    let db = TestDb::new().await;
    let stdin = format!("{PASSWORD}\n");
    // the shop's first account is an owner without being told
    let first = holdfast_with_stdin(
        &db,
        &["--json", "staff", "add", "ada@holdfast.test"],
        &stdin,
    );
    let said = json_output(&first);
    assert_eq!(said["outcome"], "added");
    assert_eq!(said["role"], "owner");
    // after it, a new account needs a role
    let unnamed = holdfast_with_stdin(&db, &["staff", "add", "bo@holdfast.test"], &stdin);
    assert!(!unnamed.status.success());
    let error = String::from_utf8_lossy(&unnamed.stderr);
    assert!(
        error.contains("--role owner, box-office or door"),
        "{error}"
    );
    let unknown = holdfast_with_stdin(
        &db,
        &["staff", "add", "bo@holdfast.test", "--role", "admin"],
        &stdin,
    );
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("not a role"));
    let added = holdfast_with_stdin(
        &db,
        &["staff", "add", "bo@holdfast.test", "--role", "box-office"],
        &stdin,
    );
    let text = String::from_utf8_lossy(&added.stdout);
    assert!(
        text.contains("bo@holdfast.test: added (box office)"),
        "{text}"
    );
    assert!(!text.contains(PASSWORD));
    let door = holdfast_with_stdin(
        &db,
        &[
            "--json",
            "staff",
            "add",
            "dee@holdfast.test",
            "--role",
            "door",
        ],
        &stdin,
    );
    assert_eq!(json_output(&door)["role"], "door");
    // an existing account: a new password, the role kept unless given
    let kept = holdfast_with_stdin(&db, &["--json", "staff", "add", "bo@holdfast.test"], &stdin);
    let said = json_output(&kept);
    assert_eq!(said["outcome"], "password changed");
    assert_eq!(
        (said["role"].as_str(), said["role_changed"].as_bool()),
        (Some("box_office"), Some(false))
    );
    let moved = holdfast_with_stdin(
        &db,
        &[
            "--json",
            "staff",
            "add",
            "bo@holdfast.test",
            "--role",
            "door",
        ],
        &stdin,
    );
    let said = json_output(&moved);
    assert_eq!(
        (said["role"].as_str(), said["role_changed"].as_bool()),
        (Some("door"), Some(true))
    );
    // the last owner keeps the role
    let demoted = holdfast_with_stdin(
        &db,
        &["staff", "add", "ada@holdfast.test", "--role", "door"],
        &stdin,
    );
    assert!(!demoted.status.success());
    assert!(String::from_utf8_lossy(&demoted.stderr).contains("last owner"));
    assert_eq!(role_of(&db.pool, "ada@holdfast.test").await, "owner");

    let listed = json_output(&run_command(
        env!("CARGO_BIN_EXE_holdfast"),
        &db,
        &["--json", "staff", "list"],
    ));
    let rows: Vec<(String, String, bool)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["email"].as_str().unwrap().to_owned(),
                row["role"].as_str().unwrap().to_owned(),
                row["two_factor"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("ada@holdfast.test".to_owned(), "owner".to_owned(), false),
            ("bo@holdfast.test".to_owned(), "door".to_owned(), false),
            ("dee@holdfast.test".to_owned(), "door".to_owned(), false),
        ]
    );
    let text = run_command(env!("CARGO_BIN_EXE_holdfast"), &db, &["staff", "list"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.lines().next().unwrap().contains("two-factor"),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("ada@holdfast.test")
            && l.contains("owner")
            && l.ends_with("off")),
        "{text}"
    );
    // every change is in Activity, as the operator's
    let recorded: Vec<(Option<i64>, String, String, String)> =
        sqlx::query_as("select staff_id, operator, action, target from staff_actions order by id")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert!(
        recorded.iter().all(
            |(staff, operator, _, _)| staff.is_none() && operator.starts_with("command line (")
        )
    );
    let what: Vec<(&str, &str)> = recorded
        .iter()
        .map(|(_, _, action, target)| (action.as_str(), target.as_str()))
        .collect();
    assert_eq!(
        what,
        [
            ("add_staff", "ada@holdfast.test"),
            ("add_staff", "bo@holdfast.test"),
            ("add_staff", "dee@holdfast.test"),
            ("set_password", "bo@holdfast.test"),
            ("set_password", "bo@holdfast.test"),
            ("change_role", "bo@holdfast.test"),
        ]
    );
}

#[tokio::test]
async fn only_an_owner_reaches_the_staff_and_settings_pages() {
    let app = spawn_app().await;
    app.add_staff().await;
    app.add_staff_as(BOX_OFFICE_EMAIL, Role::BoxOffice).await;
    app.add_staff_as(DOOR_EMAIL, Role::Door).await;
    let (owner, _) = app.staff_browser().await;
    let page = app.admin_page(&owner, "/admin/staff").await;
    for email in [STAFF_EMAIL, BOX_OFFICE_EMAIL, DOOR_EMAIL] {
        assert!(page.contains(&format!("data-staff=\"{email}\"")), "{page}");
    }
    assert!(page.contains("href=\"/admin/staff\""), "the owner's link");
    app.admin_page(&owner, "/admin/settings").await;
    let door_id = id_of(&app.db.pool, DOOR_EMAIL).await.to_string();
    for email in [BOX_OFFICE_EMAIL, DOOR_EMAIL] {
        let (staff, csrf) = app.signed_in(email, PASSWORD).await;
        let page = app.admin_page(&staff, "/admin/two-factor").await;
        assert!(!page.contains("href=\"/admin/staff\""), "{email}: no link");
        let before = snapshot(&app.db.pool).await;
        for (get, path) in [
            (true, "/admin/staff".to_owned()),
            (true, "/admin/settings".to_owned()),
            (false, "/admin/staff".to_owned()),
            (false, format!("/admin/staff/{door_id}/role")),
            (false, format!("/admin/staff/{door_id}/disable")),
            (false, format!("/admin/staff/{door_id}/enable")),
            (false, format!("/admin/staff/{door_id}/two-factor/reset")),
            (false, "/admin/settings".to_owned()),
        ] {
            let answer = if get {
                staff
                    .get(format!("{}{path}", app.address))
                    .send()
                    .await
                    .unwrap()
            } else {
                app.admin_post(
                    &staff,
                    &path,
                    &[
                        ("csrf", csrf.as_str()),
                        ("role", "owner"),
                        ("email", "x@holdfast.test"),
                        ("password", "long enough password"),
                        ("two_factor_for_refunds", "on"),
                    ],
                )
                .await
            };
            assert_eq!(answer.status(), StatusCode::FORBIDDEN, "{email} {path}");
        }
        let after = snapshot(&app.db.pool).await;
        let changed: Vec<_> = before
            .iter()
            .zip(&after)
            .filter(|(b, a)| b != a && !b.starts_with("staff_actions"))
            .collect();
        assert!(changed.is_empty(), "{email} changed {changed:?}");
    }
    assert_eq!(role_of(&app.db.pool, DOOR_EMAIL).await, "door");
}

#[tokio::test]
async fn an_owner_adds_changes_and_disables_accounts_and_each_change_is_recorded() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (owner, csrf) = app.staff_browser().await;
    // an account comes by invite (staff_invites:); an address with an
    // account already is refused and sends nothing
    app.add_staff_as(BOX_OFFICE_EMAIL, Role::BoxOffice).await;
    let again = app
        .admin_post(
            &owner,
            "/admin/staff",
            &[
                ("csrf", &csrf),
                ("email", BOX_OFFICE_EMAIL),
                ("role", "owner"),
            ],
        )
        .await;
    assert!(location(&again).ends_with("notice=staff_exists"));
    assert_eq!(role_of(&app.db.pool, BOX_OFFICE_EMAIL).await, "box_office");
    for (email, role, field) in [
        ("new@holdfast.test", "admin", "role"),
        ("new-at-holdfast", "door", "email"),
    ] {
        let refused = app
            .admin_post(
                &owner,
                "/admin/staff",
                &[("csrf", &csrf), ("email", email), ("role", role)],
            )
            .await;
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST, "{email} {role}");
        // said on the Staff page beside its field, the e-mail kept
        let page = refused.text().await.unwrap();
        assert!(page.contains(&format!("id=\"f-{field}-error\"")), "{page}");
        assert!(page.contains(&format!("value=\"{email}\"")), "{page}");
        assert!(page.contains("id=\"add-staff\""), "{page}");
    }
    let invites: i64 = sqlx::query_scalar("select count(*) from staff_invites")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(invites, 0);

    // the new account signs in and starts at Orders
    let (boxed, response) = app.try_login(BOX_OFFICE_EMAIL, PASSWORD).await;
    assert_eq!(location(&response), "/admin/orders");
    let id = id_of(&app.db.pool, BOX_OFFICE_EMAIL).await;
    // made a door account: its open session loses Orders at once
    let changed = app
        .admin_post(
            &owner,
            &format!("/admin/staff/{id}/role"),
            &[("csrf", &csrf), ("role", "door")],
        )
        .await;
    assert!(location(&changed).ends_with("notice=role_changed"));
    let orders = boxed
        .get(format!("{}/admin/orders", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(orders.status(), StatusCode::FORBIDDEN);
    app.admin_page(&boxed, "/admin/redeem").await;
    // disabled: its session ends, its password opens nothing, its row stays
    let disabled = app
        .admin_post(
            &owner,
            &format!("/admin/staff/{id}/disable"),
            &[("csrf", &csrf)],
        )
        .await;
    assert!(location(&disabled).ends_with("notice=staff_disabled"));
    let gone = boxed
        .get(format!("{}/admin/redeem", app.address))
        .header(ACCEPT, "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(location(&gone), "/admin/login");
    let (_, refused) = app.try_login(BOX_OFFICE_EMAIL, PASSWORD).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert!(refused.text().await.unwrap().contains("disabled"));
    let (_, wrong) = app
        .try_login(BOX_OFFICE_EMAIL, "not the password at all")
        .await;
    assert_eq!(
        wrong.status(),
        StatusCode::UNAUTHORIZED,
        "a stranger learns nothing"
    );
    let page = app.admin_page(&owner, "/admin/staff").await;
    assert!(page.contains("disabled"), "{page}");
    let enabled = app
        .admin_post(
            &owner,
            &format!("/admin/staff/{id}/enable"),
            &[("csrf", &csrf)],
        )
        .await;
    assert!(location(&enabled).ends_with("notice=staff_enabled"));
    let (_, back) = app.try_login(BOX_OFFICE_EMAIL, PASSWORD).await;
    assert_eq!(location(&back), "/admin/redeem");
    let missing = app
        .admin_post(&owner, "/admin/staff/999999/disable", &[("csrf", &csrf)])
        .await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);

    let recorded: Vec<(String, String, String, String)> = sqlx::query_as(
        "select s.email, a.action, a.target, a.outcome from staff_actions a \
           join staff s on s.id = a.staff_id \
          where a.action in ('add_staff', 'change_role', 'disable_staff', 'enable_staff') \
          order by a.id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    let by_owner = |action: &str, outcome: &str| {
        (
            STAFF_EMAIL.to_owned(),
            action.to_owned(),
            BOX_OFFICE_EMAIL.to_owned(),
            outcome.to_owned(),
        )
    };
    assert_eq!(
        recorded,
        [
            by_owner("change_role", "changed"),
            by_owner("disable_staff", "changed"),
            by_owner("enable_staff", "changed"),
        ]
    );
    let activity = app.admin_page(&owner, "/admin/activity").await;
    assert!(activity.contains("disable_staff"), "{activity}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_owner_cannot_be_demoted_or_disabled_even_by_two_owners_at_once() {
    let app = spawn_app().await;
    app.add_staff().await;
    let (owner, csrf) = app.staff_browser().await;
    let me = id_of(&app.db.pool, STAFF_EMAIL).await;
    for (path, form) in [
        (format!("/admin/staff/{me}/role"), vec![("role", "door")]),
        (
            format!("/admin/staff/{me}/role"),
            vec![("role", "box-office")],
        ),
        (format!("/admin/staff/{me}/disable"), vec![]),
    ] {
        let mut form = form;
        form.push(("csrf", &csrf));
        let refused = app.admin_post(&owner, &path, &form).await;
        assert!(location(&refused).ends_with("notice=last_owner"), "{path}");
        let page = app.admin_page(&owner, &location(&refused)).await;
        assert!(
            page.contains("the shop&#39;s last owner") || page.contains("last owner"),
            "{page}"
        );
    }
    assert_eq!(role_of(&app.db.pool, STAFF_EMAIL).await, "owner");
    let refusals: i64 = sqlx::query_scalar(
        "select count(*) from staff_actions where outcome = 'refused_last_owner'",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(refusals, 3, "refusals are recorded too");
    // a disabled owner does not count as one
    app.add_staff_as("sleeping@holdfast.test", Role::Owner)
        .await;
    let sleeping = id_of(&app.db.pool, "sleeping@holdfast.test").await;
    let disabled = app
        .admin_post(
            &owner,
            &format!("/admin/staff/{sleeping}/disable"),
            &[("csrf", &csrf)],
        )
        .await;
    assert!(location(&disabled).ends_with("notice=staff_disabled"));
    let refused = app
        .admin_post(
            &owner,
            &format!("/admin/staff/{me}/role"),
            &[("csrf", &csrf), ("role", "door")],
        )
        .await;
    assert!(location(&refused).ends_with("notice=last_owner"));

    // two active owners demote each other at the same moment: one of them
    // stays an owner
    app.add_staff_as("other@holdfast.test", Role::Owner).await;
    let other = id_of(&app.db.pool, "other@holdfast.test").await;
    let (second, second_csrf) = app.signed_in("other@holdfast.test", PASSWORD).await;
    for _ in 0..5 {
        let (a, b) = (
            format!("/admin/staff/{other}/role"),
            format!("/admin/staff/{me}/role"),
        );
        let answers = join_all([
            app.admin_post(&owner, &a, &[("csrf", &csrf), ("role", "door")]),
            app.admin_post(&second, &b, &[("csrf", &second_csrf), ("role", "door")]),
        ])
        .await;
        let owners: i64 = sqlx::query_scalar(
            "select count(*) from staff where role = 'owner' and disabled_at is null",
        )
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
        assert_eq!(
            owners,
            1,
            "{:?}",
            answers.iter().map(location).collect::<Vec<_>>()
        );
        // put both back for the next round, as a third party would
        sqlx::query("update staff set role = 'owner' where id = any($1)")
            .bind([me, other])
            .execute(&app.db.pool)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn an_owner_resets_a_lost_second_factor_and_the_account_enrols_again() {
    let app = spawn_app().await;
    app.add_staff().await;
    app.add_staff_as(BOX_OFFICE_EMAIL, Role::BoxOffice).await;
    let (owner, csrf) = app.staff_browser().await;
    let (boxed, _) = app.signed_in(BOX_OFFICE_EMAIL, PASSWORD).await;
    let enrolled = enrol(&app.address, &boxed).await;
    let page = app.admin_page(&owner, "/admin/staff").await;
    let row = page
        .split(&format!("data-staff=\"{BOX_OFFICE_EMAIL}\""))
        .nth(1)
        .unwrap();
    assert!(
        row.split("</tr>").next().unwrap().contains("badge ok\">on"),
        "{page}"
    );
    assert!(!page.contains(&enrolled.secret));
    let id = id_of(&app.db.pool, BOX_OFFICE_EMAIL).await;
    let reset = app
        .admin_post(
            &owner,
            &format!("/admin/staff/{id}/two-factor/reset"),
            &[("csrf", &csrf)],
        )
        .await;
    assert!(location(&reset).ends_with("notice=two_factor_reset"));
    // its session is gone; the password alone signs in again
    let gone = boxed
        .get(format!("{}/admin/orders", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), StatusCode::UNAUTHORIZED);
    let (_, response) = app.try_login(BOX_OFFICE_EMAIL, PASSWORD).await;
    assert_eq!(location(&response), "/admin/orders");
    let left: i64 = sqlx::query_scalar("select count(*) from staff_recovery_codes")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(left, 0);
    // the record says who reset it
    let recorded: (String, String) = sqlx::query_as(
        "select s.email, a.target from staff_actions a join staff s on s.id = a.staff_id \
          where a.action = 'reset_two_factor'",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(
        recorded,
        (STAFF_EMAIL.to_owned(), BOX_OFFICE_EMAIL.to_owned())
    );

    // the operator's way back, for the last owner's lost phone
    let enrolled = enrol(&app.address, &owner).await;
    let reset = run_command(
        env!("CARGO_BIN_EXE_holdfast"),
        &app.db,
        &["--json", "staff", "reset-two-factor", STAFF_EMAIL],
    );
    assert_eq!(json_output(&reset)["two_factor_was_on"], true);
    let (_, response) = app.try_login(STAFF_EMAIL, STAFF_PASSWORD).await;
    assert_eq!(location(&response), "/admin", "no code asked");
    assert!(!String::from_utf8_lossy(&reset.stdout).contains(&enrolled.secret));
    let operator: String = sqlx::query_scalar(
        "select operator from staff_actions where action = 'reset_two_factor' and staff_id is null",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert!(operator.starts_with("command line ("), "{operator}");
}
