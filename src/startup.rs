//! Build the web server from settings. Tests bind port 0.

use std::net::TcpListener;

use actix_web::dev::Server;
use actix_web::{App, HttpServer, web};
use sqlx::PgPool;

use crate::routes;

/// A server bound and ready to run, with the address it got.
pub struct Application {
    pub port: u16,
    server: Server,
}

impl Application {
    pub fn build(listener: TcpListener, pool: PgPool) -> anyhow::Result<Self> {
        let port = listener.local_addr()?.port();
        let pool = web::Data::new(pool);
        let server = HttpServer::new(move || {
            App::new()
                .app_data(pool.clone())
                .app_data(web::PayloadConfig::new(64 * 1024))
                .route("/healthz", web::get().to(routes::healthz))
        })
        .listen(listener)?
        .run();
        Ok(Self { port, server })
    }

    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.server.await
    }
}
