//! The admin's schedule page by day (issue 33): a pickup schedule's slots
//! grouped under their day in the shop's time, each day with how many
//! slots it has and what is left of them, each slot with its time and
//! what is left; over HTTP against the real app and PostgreSQL.

use chrono::{DateTime, Utc};
use reqwest::StatusCode;

use holdfast_testkit::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schedule_page_lists_its_slots_a_day_at_a_time_with_what_is_left() {
    let app = spawn_app_with(TestDb::new().await).await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let mut fields = vec![
        ("csrf", csrf.as_str()),
        ("title", "Bread pickup"),
        ("lede", "Fresh each morning."),
        ("id", "bread"),
        ("name", "Rye loaf"),
        ("description", ""),
        ("price", "6.50"),
        ("capacity", "4"),
        ("max_per_order", "2"),
        ("opens", "20:00"),
        ("closes", "22:00"),
        ("slot_minutes", "30"),
        ("days_ahead", "3"),
        ("closed_days", ""),
    ];
    for day in ["1", "2", "3", "4", "5", "6", "7"] {
        fields.push(("weekday", day));
    }
    let answer = app
        .admin_post(&staff, "/admin/catalogue/schedules", &fields)
        .await;
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    // a new schedule starts as a draft (drafts::): published, it sells
    let published = app
        .admin_post(
            &staff,
            "/admin/catalogue/collections/bread/publish",
            &[("csrf", csrf.as_str())],
        )
        .await;
    assert_eq!(published.status(), StatusCode::SEE_OTHER);
    app.settled().await;

    #[derive(sqlx::FromRow)]
    struct Slot {
        id: String,
        starts_at: DateTime<Utc>,
    }
    let slots: Vec<Slot> = sqlx::query_as(
        "select id, starts_at from products where collection = 'bread' and active \
          order by starts_at",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert!(
        slots.len() >= 4 * 3,
        "four slots a day, three days at least"
    );
    let first = &slots[0];
    app.buy(&browser(), &Purchase::of(&first.id, 1)).await;

    // the days as the shop's zone (UTC here) has them, in order
    let mut days: Vec<(String, usize)> = Vec::new();
    for slot in &slots {
        let label = slot.starts_at.format("%A %-d %B").to_string();
        match days.last_mut() {
            Some((day, count)) if *day == label => *count += 1,
            _ => days.push((label, 1)),
        }
    }
    let page = app
        .admin_page(&staff, "/admin/catalogue/schedules/bread")
        .await;
    assert_eq!(page.matches("class=\"slot-day\"").count(), days.len());
    let mut at = 0;
    for (index, (label, count)) in days.iter().enumerate() {
        let left = count * 4 - usize::from(index == 0);
        let slots = if *count == 1 { "slot" } else { "slots" };
        let heading =
            format!(">{label} <span class=\"small\">{count} {slots}, {left} left</span></h3>");
        let found = page[at..]
            .find(&heading)
            .unwrap_or_else(|| panic!("{heading} in order: {page}"));
        at += found + heading.len();
    }
    // the slot bought from says its time and the three left
    let row = page
        .split(&format!("<tr data-slot=\"{}\">", first.id))
        .nth(1)
        .unwrap()
        .split("</tr>")
        .next()
        .unwrap()
        .to_owned();
    assert!(
        row.starts_with(&format!(
            "<td>{}<span class=\"sr-only\">: ",
            first.starts_at.format("%H:%M UTC")
        )),
        "{row}"
    );
    assert!(row.ends_with("<td class=\"num\">3</td>"), "{row}");
}
