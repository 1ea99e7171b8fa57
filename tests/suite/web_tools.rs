//! FetchURL and SearchWeb seen from outside: the scripted model calls them, a local HTTP server (wiremock)
//! plays the web and the search service, and the ToolResult events carry what the model would read.

use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::common::{TestHome, WireProcess, kinds, payloads, tool_call_line};

const MAIN_CONTENT: &str = "The returned content is the main text content extracted from the page.";
const FULL_CONTENT: &str = "The returned content is the full content of the page.";

/// A session whose model calls `name` with `args` once, then ends the turn; `services` (when given)
/// becomes the config's `[services]` and `env` is added to the binary's environment. Returns the
/// call's `return_value`.
async fn call_tool(services: Option<Value>, env: &[(&str, &str)], name: &str, args: Value) -> Result<Value> {
    call_tool_in(TestHome::new()?, services, env, name, args).await
}

/// [`call_tool`] in a given home (one holding a login's tokens, say).
async fn call_tool_in(
    mut home: TestHome,
    services: Option<Value>,
    env: &[(&str, &str)],
    name: &str,
    args: Value,
) -> Result<Value> {
    let call = format!(
        "text: calling {name}\n{}",
        tool_call_line("tc-1", name, Some(&args.to_string()))
    );
    let config_path = home.scripted_config(&[&call, "text: done"], json!({}))?;
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&config_path)?)?;
    if let Some(services) = services {
        config["services"] = services;
    }
    // The local servers standing in for the web: reachable, and read without a question.
    config["fetch_allowed_hosts"] = json!(["127.0.0.1"]);
    config["fetch_allow_private_hosts"] = json!(["127.0.0.1"]);
    std::fs::write(&config_path, serde_json::to_string(&config)?)?;
    home.config = Some(config_path);
    let mut wire = WireProcess::spawn_with_env(&home, home.args(), env).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (response, messages) = wire.prompt(json!("use the web")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    // Reading the web needs no approval.
    assert!(
        !kinds(&messages).iter().any(|k| k == "request:ApprovalRequest"),
        "{:?}",
        kinds(&messages)
    );
    match payloads(&messages, "ToolResult").as_slice() {
        [result] => {
            assert_eq!(result["tool_call_id"], "tc-1");
            Ok(result["return_value"].clone())
        }
        results => bail!("expected one ToolResult, got {results:?}"),
    }
}

async fn fetch(url: &str) -> Result<Value> {
    call_tool(None, &[], "FetchURL", json!({ "url": url })).await
}

/// A server answering `GET /page` with `template`.
async fn page_server(template: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/page"))
        .respond_with(template)
        .mount(&server)
        .await;
    server
}

fn page_url(server: &MockServer) -> String {
    format!("{}/page", server.uri())
}

fn output(value: &Value) -> Result<&str> {
    value["output"].as_str().context("output is not text")
}

fn error(message: &str, brief: &str) -> Value {
    json!({"is_error": true, "output": "", "message": message,
           "display": [{"type": "brief", "text": brief}], "extras": null})
}

#[tokio::test]
async fn fetch_url_turns_an_html_page_into_markdown() -> Result<()> {
    let html = r#"<!doctype html><html><head><title>Changelog</title>
        <meta name="description" content="What is new"></head>
        <body><nav><a href="/">Home</a> <a href="/docs">Docs</a></nav>
        <article><h1>Changelog</h1>
        <p>This release makes the <strong>parser</strong> twice as fast and fixes a crash on empty input.
        Read the <a href="/guide">upgrade guide</a> before you move to it.</p>
        <h2>Breaking changes</h2><ul><li>The old flag is gone</li><li>Configs need a version</li></ul>
        </article><footer>Site footer</footer><script>track()</script></body></html>"#;
    let server = page_server(ResponseTemplate::new(200).set_body_raw(html, "text/html; charset=utf-8")).await;
    let url = page_url(&server);
    let value = fetch(&url).await?;
    assert_eq!(value["is_error"], false, "{value}");
    assert_eq!(value["message"], MAIN_CONTENT);
    assert_eq!(value["display"], json!([]));
    let text = output(&value)?;
    assert!(
        text.starts_with(&format!(
            "---\ntitle: Changelog\nurl: {url}\ndescription: What is new\n---\n"
        )),
        "{text}"
    );
    for expected in [
        "**parser**",
        &format!("[upgrade guide]({}/guide)", server.uri()),
        "## Breaking changes",
        "- The old flag is gone",
    ] {
        assert!(text.contains(expected), "{expected:?} missing from:\n{text}");
    }
    for noise in ["Site footer", "track()", "<p>", "Docs"] {
        assert!(!text.contains(noise), "{noise:?} kept in:\n{text}");
    }
    Ok(())
}

#[tokio::test]
async fn fetch_url_passes_plain_text_through() -> Result<()> {
    let text = "line one\n  line two\n<not html>\n";
    let server =
        page_server(ResponseTemplate::new(200).set_body_raw(text, "text/plain; charset=utf-8")).await;
    let value = fetch(&page_url(&server)).await?;
    assert_eq!(
        value,
        json!({"is_error": false, "output": text, "message": FULL_CONTENT, "display": [], "extras": null})
    );
    Ok(())
}

#[tokio::test]
async fn fetch_url_refuses_binary_content() -> Result<()> {
    let png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR".to_vec();
    let server = page_server(ResponseTemplate::new(200).set_body_raw(png, "image/png")).await;
    let value = fetch(&page_url(&server)).await?;
    assert_eq!(
        value,
        error(
            "Failed to fetch URL: the response is not text (content type: image/png). FetchURL reads web pages and text documents only.",
            "Unsupported content type"
        )
    );
    Ok(())
}

#[tokio::test]
async fn fetch_url_reports_http_errors() -> Result<()> {
    let server = page_server(ResponseTemplate::new(404).set_body_string("no such page")).await;
    let value = fetch(&page_url(&server)).await?;
    assert_eq!(
        value,
        error(
            "Failed to fetch URL. Status: 404. This may indicate the page is not accessible or the server is down.",
            "HTTP 404 error"
        )
    );
    Ok(())
}

#[tokio::test]
async fn fetch_url_reports_a_bad_url() -> Result<()> {
    let value = fetch("not-a-valid-url").await?;
    assert_eq!(
        value,
        error(
            "Failed to fetch URL due to network error: not-a-valid-url. This may indicate the URL is invalid or the server is unreachable.",
            "Network error"
        )
    );
    Ok(())
}

#[tokio::test]
async fn fetch_url_refuses_an_oversized_body() -> Result<()> {
    let server = page_server(ResponseTemplate::new(200).set_body_raw(vec![b'a'; 4096], "text/plain")).await;
    let value = call_tool(
        None,
        &[("KIMI_AGENT_WEB_MAX_BYTES", "2048")],
        "FetchURL",
        json!({ "url": page_url(&server) }),
    )
    .await?;
    assert_eq!(
        value,
        error(
            "Failed to fetch URL: the response body is larger than 2 KiB, the most FetchURL reads.",
            "Response too large"
        )
    );
    Ok(())
}

#[tokio::test]
async fn fetch_url_times_out_on_a_slow_server() -> Result<()> {
    let slow = ResponseTemplate::new(200)
        .set_body_raw("too late", "text/plain")
        .set_delay(Duration::from_secs(30));
    let server = page_server(slow).await;
    let value = call_tool(
        None,
        &[("KIMI_AGENT_WEB_TIMEOUT_MS", "300")],
        "FetchURL",
        json!({ "url": page_url(&server) }),
    )
    .await?;
    assert_eq!(
        value,
        error(
            "Failed to fetch URL: request timed out. The server may be slow or unreachable.",
            "Request timed out"
        )
    );
    Ok(())
}

#[tokio::test]
async fn fetch_url_asks_the_fetch_service_first() -> Result<()> {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/fetch"))
        .and(header("authorization", "Bearer fetch-key"))
        .and(header("accept", "text/markdown"))
        .and(header("x-msh-tool-call-id", "tc-1"))
        .and(body_json(json!({"url": "http://127.0.0.1:9/article"})))
        .respond_with(ResponseTemplate::new(200).set_body_string("# Article\n\nFrom the service.\n"))
        .expect(1)
        .mount(&server)
        .await;
    let services =
        json!({"moonshot_fetch": {"base_url": format!("{}/fetch", server.uri()), "api_key": "fetch-key"}});
    let value = call_tool(
        Some(services),
        &[],
        "FetchURL",
        json!({"url": "http://127.0.0.1:9/article"}),
    )
    .await?;
    assert_eq!(
        value,
        json!({"is_error": false, "output": "# Article\n\nFrom the service.\n",
               "message": "The returned content is the main content extracted from the page.",
               "display": [], "extras": null})
    );
    Ok(())
}

#[tokio::test]
async fn search_web_is_not_offered_without_a_search_service() -> Result<()> {
    let value = call_tool(None, &[], "SearchWeb", json!({"query": "rust"})).await?;
    assert_eq!(
        value,
        error("Tool `SearchWeb` not found", "Tool `SearchWeb` not found")
    );
    Ok(())
}

#[tokio::test]
async fn search_web_queries_the_configured_service() -> Result<()> {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/search"))
        .and(header("authorization", "Bearer search-key"))
        .and(header("x-msh-tool-call-id", "tc-1"))
        .and(header("x-team", "web"))
        .and(body_json(json!({
            "text_query": "rust 2024 edition",
            "limit": 3,
            "enable_page_crawling": false,
            "timeout_seconds": 30,
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"search_results": [
            {"site_name": "Rust Blog", "title": "Rust 2024", "url": "https://blog.rust-lang.org/2024",
             "snippet": "The edition is out.", "date": "2025-02-20", "icon": "", "mime": "text/html"},
            {"site_name": "Docs", "title": "Edition guide", "url": "https://doc.rust-lang.org/edition-guide",
             "snippet": "What changed.", "content": ""},
        ]})))
        .expect(1)
        .mount(&server)
        .await;
    let services = json!({"moonshot_search": {
        "base_url": format!("{}/search", server.uri()),
        "api_key": "search-key",
        "custom_headers": {"X-Team": "web"},
    }});
    let value = call_tool(
        Some(services),
        &[],
        "SearchWeb",
        json!({"query": "rust 2024 edition", "limit": 3}),
    )
    .await?;
    assert_eq!(
        value,
        json!({"is_error": false,
               "output": "Title: Rust 2024\nDate: 2025-02-20\nURL: https://blog.rust-lang.org/2024\nSummary: The edition is out.\n\n\
                          ---\n\n\
                          Title: Edition guide\nDate: \nURL: https://doc.rust-lang.org/edition-guide\nSummary: What changed.\n\n",
               "message": "", "display": [], "extras": null})
    );
    Ok(())
}

/// After `login` the services name the account's token instead of a key (reference
/// `resolve_api_key`): the stored access token is the bearer, with the device headers.
#[tokio::test]
async fn the_services_use_the_logins_token_when_they_name_one() -> Result<()> {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/search"))
        .and(header("authorization", "Bearer account-token"))
        .and(header("x-msh-platform", "kimi_cli"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"search_results": [
                {"site_name": "S", "title": "T", "url": "https://example.com", "snippet": "found"},
            ]})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let home = TestHome::new()?;
    let credentials = home.share().join("credentials");
    std::fs::create_dir_all(&credentials)?;
    std::fs::write(
        credentials.join("kimi-code.json"),
        json!({"access_token": "account-token", "refresh_token": "r", "expires_at": 4102444800.0,
               "scope": "", "token_type": "Bearer", "expires_in": 900.0})
        .to_string(),
    )?;
    let services = json!({"moonshot_search": {
        "base_url": format!("{}/search", server.uri()),
        "api_key": "",
        "oauth": {"storage": "file", "key": "oauth/kimi-code"},
    }});
    let value = call_tool_in(home, Some(services), &[], "SearchWeb", json!({"query": "q"})).await?;
    assert_eq!(value["is_error"], json!(false), "{value}");
    assert!(
        value["output"].as_str().is_some_and(|o| o.contains("found")),
        "{value}"
    );
    Ok(())
}

/// A service naming a login that has no stored token, and no key: not configured (the fallback to a
/// configured key is unit-tested in `kimi_core::auth`).
#[tokio::test]
async fn a_service_naming_a_missing_login_and_no_key_is_not_configured() -> Result<()> {
    let services = json!({"moonshot_search": {
        "base_url": "http://127.0.0.1:9/search",
        "api_key": "",
        "oauth": {"storage": "file", "key": "oauth/kimi-code"},
    }});
    let value = call_tool(Some(services), &[], "SearchWeb", json!({"query": "q"})).await?;
    assert_eq!(
        value,
        error(
            "Search service is not configured. You may want to try other methods to search.",
            "Search service not configured"
        )
    );
    Ok(())
}

#[tokio::test]
async fn search_web_reports_a_failing_service() -> Result<()> {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(502))
        .mount(&server)
        .await;
    let services = json!({"moonshot_search": {"base_url": server.uri(), "api_key": "k"}});
    let value = call_tool(Some(services), &[], "SearchWeb", json!({"query": "anything"})).await?;
    assert_eq!(
        value,
        error(
            "Failed to search. Status: 502. This may indicate that the search service is currently unavailable.",
            "Failed to search"
        )
    );
    Ok(())
}
