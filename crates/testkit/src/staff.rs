//! Staff: the one account tests sign in with, and a signed-in staff
//! browser with its session's CSRF token.

use holdfast::configuration::Secret;
use reqwest::StatusCode;

use crate::client::browser;
use crate::shop::TestApp;
use crate::shopper::{hidden, location, read_page};

/// The staff account [`TestApp::add_staff`] makes.
pub const STAFF_EMAIL: &str = "grace@holdfast.test";
pub const STAFF_PASSWORD: &str = "correct horse battery staple";
/// The password of every account [`TestApp::add_staff_as`] makes.
pub const PASSWORD: &str = "a long enough passphrase";

impl TestApp {
    /// Make the staff account ([`STAFF_EMAIL`], [`STAFF_PASSWORD`]).
    pub async fn add_staff(&self) {
        holdfast::staff::add_staff(
            &self.db.pool,
            &holdfast::staff::StaffEmail::parse(STAFF_EMAIL).unwrap(),
            &Secret::new(STAFF_PASSWORD),
        )
        .await
        .unwrap();
    }

    /// An account with a role, as `holdfast staff add --role` makes it,
    /// with [`PASSWORD`].
    pub async fn add_staff_as(&self, email: &str, role: holdfast::staff::roles::Role) {
        holdfast::staff::accounts::set_up(
            &self.db.pool,
            "tests",
            &holdfast::staff::StaffEmail::parse(email).unwrap(),
            &Secret::new(PASSWORD),
            Some(role),
        )
        .await
        .unwrap();
    }

    /// A browser signed in with a password alone (an account without
    /// two-factor) on the page its role starts on, and its CSRF token.
    pub async fn signed_in(&self, email: &str, password: &str) -> (reqwest::Client, String) {
        let (staff, response) = self.try_login(email, password).await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "{email} signs in");
        let page = self.admin_page(&staff, &location(&response)).await;
        (staff, hidden(&page, "csrf"))
    }

    /// One login attempt from a fresh browser: the form, then the post.
    pub async fn try_login(
        &self,
        email: &str,
        password: &str,
    ) -> (reqwest::Client, reqwest::Response) {
        self.try_login_with(browser(), email, password).await
    }

    /// [`TestApp::try_login`] from the given browser (one bound to another
    /// client address, say).
    pub async fn try_login_with(
        &self,
        staff: reqwest::Client,
        email: &str,
        password: &str,
    ) -> (reqwest::Client, reqwest::Response) {
        let form = read_page(&staff, &format!("{}/admin/login", self.address)).await;
        let csrf = hidden(&form, "csrf");
        let response = staff
            .post(format!("{}/admin/login", self.address))
            .form(&[("email", email), ("password", password), ("csrf", &csrf)])
            .send()
            .await
            .unwrap();
        (staff, response)
    }

    /// A signed-in staff browser and its session's CSRF token.
    pub async fn staff_browser(&self) -> (reqwest::Client, String) {
        let (staff, response) = self.try_login(STAFF_EMAIL, STAFF_PASSWORD).await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        assert_eq!(location(&response), "/admin");
        let page = self.admin_page(&staff, "/admin/resources").await;
        let csrf = hidden(&page, "csrf");
        (staff, csrf)
    }

    /// A staff page that must answer 200: its text.
    pub async fn admin_page(&self, staff: &reqwest::Client, path: &str) -> String {
        let response = staff
            .get(format!("{}{path}", self.address))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "GET {path}");
        response.text().await.unwrap()
    }

    /// A staff form posted as is: the shop's answer.
    pub async fn admin_post(
        &self,
        staff: &reqwest::Client,
        path: &str,
        form: &[(&str, &str)],
    ) -> reqwest::Response {
        staff
            .post(format!("{}{path}", self.address))
            .form(form)
            .send()
            .await
            .unwrap()
    }
}
