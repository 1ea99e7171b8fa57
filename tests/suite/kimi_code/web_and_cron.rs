//! seeds/002 "网络类" and "定时任务": WebSearch, FetchURL, CronCreate, CronList and CronDelete.

use anyhow::{Context, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wiremock::matchers::{body_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::{calling, kimi_code, not_found, step, turn};
use crate::common::TestHome;

/// A home whose model makes `calls` in one step, with `services` as the config's `[services]`.
fn calling_with_services(calls: &[(&str, &str, Value)], services: Value) -> Result<TestHome> {
    let mut home = calling(calls)?;
    let config_path = home.config.clone().unwrap_or_default();
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&config_path)?)?;
    config["services"] = services;
    std::fs::write(&config_path, serde_json::to_string(&config)?)?;
    home.config = Some(config_path);
    Ok(home)
}

#[tokio::test]
async fn web_search_exists_only_with_a_search_service_and_checks_its_limit() -> Result<()> {
    // Without a service, the tool is not there.
    let home = calling(&[("s-0", "WebSearch", json!({"query": "q"}))])?;
    let (_home, mut wire) = kimi_code(home).await?;
    assert_eq!(
        turn(&mut wire, "search").await?.message("s-0")?,
        not_found("WebSearch")
    );
    drop(wire);

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/search"))
        .and(body_json(json!({
            "text_query": "rust", "limit": 5, "enable_page_crawling": false, "timeout_seconds": 30,
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"search_results": [
            {"title": "Rust", "url": "https://www.rust-lang.org", "snippet": "A language.", "date": "2025-01-01"}
        ]})))
        .expect(1)
        .mount(&server)
        .await;
    let services =
        json!({"moonshot_search": {"base_url": format!("{}/search", server.uri()), "api_key": "k"}});
    let home = calling_with_services(
        &[
            ("s-1", "WebSearch", json!({"query": "rust"})),
            ("s-2", "WebSearch", json!({"query": "rust", "limit": 21})),
            ("s-3", "SearchWeb", json!({"query": "rust"})),
            ("s-4", "WebSearch", json!({"query": "rust", "limit": 0})),
        ],
        services,
    )?;
    let (_home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "search").await?;
    assert_eq!(turn.actions(), Vec::<String>::new());
    assert_eq!(
        turn.output("s-1")?,
        "Title: Rust\nDate: 2025-01-01\nURL: https://www.rust-lang.org\nSummary: A language.\n\n"
    );
    assert_eq!(turn.result("s-2")?["is_error"], json!(true));
    assert_eq!(
        turn.message("s-2")?,
        "Error validating JSON arguments: 1 validation error for Params\nlimit\n  Input should be less than \
         or equal to 20"
    );
    assert_eq!(
        turn.message("s-4")?,
        "Error validating JSON arguments: 1 validation error for Params\nlimit\n  Input should be greater \
         than or equal to 1"
    );
    assert_eq!(turn.message("s-3")?, not_found("SearchWeb"));
    Ok(())
}

#[tokio::test]
async fn fetch_url_passes_plain_text_through() -> Result<()> {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/notes.txt"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/plain")
                .set_body_string("plain notes"),
        )
        .mount(&server)
        .await;
    let mut home = calling(&[(
        "f-1",
        "FetchURL",
        json!({"url": format!("{}/notes.txt", server.uri())}),
    )])?;
    // The local server stands in for the web: reachable, and read without a question (docs/security.md).
    let config_path = home.config.clone().context("scripted home has a config")?;
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&config_path)?)?;
    config["fetch_allowed_hosts"] = json!(["127.0.0.1"]);
    config["fetch_allow_private_hosts"] = json!(["127.0.0.1"]);
    std::fs::write(&config_path, serde_json::to_string(&config)?)?;
    home.config = Some(config_path);
    let (_home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "fetch").await?;
    // seeds/002: FetchURL runs without asking. Here that needs the host in `fetch_allowed_hosts`:
    // both agents ask before fetching from any other host (protocol.md S5).
    assert_eq!(turn.actions(), Vec::<String>::new());
    assert_eq!(turn.output("f-1")?, "plain notes");
    assert_eq!(
        turn.message("f-1")?,
        "The returned content is the full content of the page."
    );
    Ok(())
}

/// The `id: ...` line of a CronCreate output.
fn job_id(output: &str) -> String {
    output
        .lines()
        .find_map(|l| l.strip_prefix("id: "))
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn cron_create_list_and_delete_follow_seeds_fields_and_errors() -> Result<()> {
    let create = step(&[
        (
            "c-1",
            "CronCreate",
            json!({"cron": "*/5 * * * *", "prompt": "check the build"}),
        ),
        ("c-2", "CronCreate", json!({"cron": "61 * * * *", "prompt": "x"})),
        (
            "c-3",
            "CronCreate",
            json!({"cron": "* * * * *", "prompt": "x".repeat(8193)}),
        ),
    ]);
    let list = step(&[
        ("l-1", "CronList", json!({})),
        ("d-1", "CronDelete", json!({"id": "deadbeef"})),
    ]);
    let home = TestHome::new()?.scripted(&[&create, &list, "text: done"])?;
    let (_home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "schedule").await?;
    // CronCreate asks (its expression and prompt are checked when it runs); CronList and an unknown
    // id do not.
    assert_eq!(turn.actions().len(), 3);
    assert!(
        turn.actions()[0].starts_with("schedule recurring prompt `*/5 * * * *`"),
        "{:?}",
        turn.actions()
    );
    let created = turn.output("c-1")?;
    let id = job_id(&created);
    assert!(
        id.len() == 8 && id.chars().all(|c| c.is_ascii_hexdigit()),
        "{created}"
    );
    assert!(
        created.contains("\nhumanSchedule: every 5 minutes\nrecurring: true\nnextFireAt: "),
        "{created}"
    );
    assert!(
        turn.message("c-2")?.starts_with("Invalid cron expression"),
        "{}",
        turn.message("c-2")?
    );
    assert_eq!(turn.result("c-3")?["is_error"], json!(true));
    assert_eq!(
        turn.message("c-3")?,
        "The prompt is 8193 bytes long; the limit is 8192 bytes (UTF-8)."
    );
    let listed = turn.output("l-1")?;
    assert!(
        listed.starts_with(&format!("cron_jobs: 1\nid: {id}\ncron: */5 * * * *\n")),
        "{listed}"
    );
    assert!(listed.contains("\nprompt: \"check the build\"\n"), "{listed}");
    assert_eq!(turn.message("d-1")?, "No cron job with id deadbeef");
    Ok(())
}

#[tokio::test]
async fn cron_list_is_empty_and_cron_delete_asks() -> Result<()> {
    let create = step(&[(
        "c-1",
        "CronCreate",
        json!({"cron": "0 9 * * 1", "prompt": "standup", "recurring": false}),
    )]);
    let home = TestHome::new()?.scripted(&[&create, "text: created"])?;
    let (home, mut wire) = kimi_code(home).await?;
    let created = turn(&mut wire, "schedule").await?;
    let id = job_id(&created.output("c-1")?);
    assert!(created.output("c-1")?.contains("recurring: false"));
    wire.wait_exit().await?;
    // The job survives in the session; the next run deletes it and finds none left.
    let delete = step(&[("d-1", "CronDelete", json!({"id": id}))]);
    let list = step(&[("l-1", "CronList", json!({}))]);
    let home = home.arg("--continue");
    home.write_scripts("scripts.json", &[&delete, &list, "text: done"])?;
    let (_home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "delete").await?;
    assert_eq!(turn.actions(), ["delete cron job"]);
    assert_eq!(turn.output("d-1")?, format!("Deleted cron job {id}."));
    assert_eq!(turn.output("l-1")?, "cron_jobs: 0\nNo cron jobs scheduled.");
    Ok(())
}
