//! A routed stream (one topic, a table per value of a field) on the job
//! page, in headless Chromium: the stream's table is shown as its template
//! (not a link to a table named after the template), and the tables the
//! last successful run wrote are listed, each linking to its table page.

use std::time::Duration;

use serde_json::json;

use crate::serve_support::{plain_source, temp_data_dir, Server, ADMIN_PASSWORD};
use crate::support::{create_topic, produce};
use crate::testbed::unique_name;

#[test]
fn serve_job_page_lists_a_routed_streams_tables_and_links_each() {
    let topic = unique_name("ui_route");
    create_topic(&topic, 1);
    let messages: Vec<(String, String)> = [(1, "red"), (2, "blue"), (3, "red")]
        .iter()
        .map(|(id, kind)| (id.to_string(), json!({"id": id, "kind": kind}).to_string()))
        .collect();
    produce(&topic, &messages);
    let dir = temp_data_dir();
    let server = Server::start(&dir, Some(ADMIN_PASSWORD));
    let mut api = server.client();
    api.login(ADMIN_PASSWORD).expect(200);
    let source = plain_source(&api, &topic);
    let destination = crate::serve_support::embedded_destination(&api);
    let job = api
        .json(
            "POST",
            "/api/jobs",
            Some(&json!({
                "name": unique_name("ui_route_job"), "source_id": source["id"],
                "destination_id": destination["id"], "paused": false,
                "streams": [{"topic": topic, "table": "shop_{kind}"}],
            })),
        )
        .expect(201)
        .json();
    let id = job["id"].as_i64().unwrap();
    let run = api
        .json("POST", &format!("/api/jobs/{id}/sync"), None)
        .expect(202)
        .json()["run_id"]
        .as_i64()
        .unwrap();
    let done = api.poll(&format!("/api/runs/{run}"), Duration::from_secs(180), |r| {
        r["status"] != "running"
    });
    assert_eq!(done["status"], "succeeded", "{done}\n{}", server.log());
    crate::serve_browser::drive(browse(&dir, &server.base, id));
}

async fn browse(dir: &std::path::Path, base: &str, id: i64) {
    let (_driver, page) = crate::serve_browser::logged_in_page(dir, base).await;
    let limit = Duration::from_secs(30);
    page.go(&format!("#/jobs/{id}")).await;
    let streams = page
        .text_until("#overview-streams", limit, |t| t.contains("routed"))
        .await;
    assert!(streams.contains("shop_{kind} (routed)"), "{streams}");
    let links = page
        .client
        .execute(
            "return [...document.querySelectorAll('main a')].map((a) => a.getAttribute('href'))
               .filter((h) => h.includes('/tables/'));",
            vec![],
        )
        .await
        .unwrap();
    let mut links: Vec<String> = serde_json::from_value(links).unwrap();
    links.sort();
    assert_eq!(
        links,
        [
            format!("#/jobs/{id}/tables/shop_blue"),
            format!("#/jobs/{id}/tables/shop_red"),
        ],
        "only the routed tables are linked, once each"
    );
    let written = page
        .text_until("#written-tables", limit, |t| t.contains("shop_red"))
        .await;
    assert!(written.contains("shop_blue"), "{written}");
    page.click("#written-tables a[href$='/shop_red']").await;
    let table = page
        .text_until("main", limit, |t| t.contains("Rows written"))
        .await;
    assert!(table.contains("_topics.shop_red"), "{table}");
    // Its rows: the two red messages.
    let rows = page
        .text_until("#table-overview .fact span:last-child", limit, |t| {
            !t.is_empty()
        })
        .await;
    assert_eq!(rows, "2", "rows written to shop_red");
    page.assert_accessible("a routed table's page").await;
    page.client.close().await.unwrap();
}
