use crate::helpers::spawn_app;

#[tokio::test]
async fn healthz_answers_when_the_database_does() {
    let app = spawn_app().await;
    let response = app
        .client
        .get(format!("{}/healthz", app.address))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["database"], "ok");
    // an address nothing serves is a plain 404
    let missing = app
        .client
        .get(format!("{}/healthz/extra", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let _ = &app.db;
}
