//! `SearchWeb`: asks the configured Moonshot search service and lists what it found (reference
//! `kimi_cli/tools/web/search.py`).
//!
//! Built only when `[services.moonshot_search]` is configured (the reference raises `SkipThisTool`
//! otherwise). A call is one `POST base_url` with `{text_query, limit, enable_page_crawling,
//! timeout_seconds: 30}`, answered by `{search_results: [{site_name, title, url, snippet, content?,
//! date?, ...}]}`. Each result becomes a `Title / Date / URL / Summary` block (plus the page text when
//! `include_content` asked for it), blocks separated by `---`, exactly as the reference prints them.

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use kimi_core::ServiceConfig;
use kimi_core::{CallContext, Plan, Tool, parse_args};
use kimi_llm::http::LazyClient;
use kimi_llm::{ToolSpec, UserAgent};
use kimi_wire::message::ToolReturnValue;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use super::body::{self, ReadError, Size};
use super::{Failure, MAX_OUTPUT_CHARS, Timeouts, WebSettings, client, service_headers, service_key};
use crate::args;
use crate::output::OutputBuilder;

/// The tool's name.
pub const NAME: &str = "SearchWeb";

/// Results asked for when the model does not say (reference default), and the allowed range.
const DEFAULT_LIMIT: i64 = 5;
const MIN_LIMIT: i64 = 1;
const MAX_LIMIT: i64 = 20;

/// How long the service may spend on its side, sent with every request (reference value).
const SERVICE_TIMEOUT_SECONDS: u64 = 30;

// Parameters of `SearchWeb` (plain comments on the types: doc comments would become schema
// descriptions).
#[derive(Debug, Deserialize, JsonSchema)]
struct SearchArgs {
    /// What to search the web for.
    query: String,
    /// How many results to return. The default suits most searches; when the results miss what you
    /// need, a more specific query helps more than a larger number.
    #[serde(default = "default_limit")]
    #[schemars(schema_with = "crate::args::plain_integer", range(min = 1, max = 20))]
    limit: i64,
    /// Also return the text of each result page. This can take a great many tokens, so keep `limit`
    /// small when you turn it on.
    #[serde(default)]
    include_content: bool,
}

fn default_limit() -> i64 {
    DEFAULT_LIMIT
}

/// The service's answer.
#[derive(Debug, Deserialize)]
struct SearchResponse {
    search_results: Vec<SearchResult>,
}

/// One result. `site_name`, `icon` and `mime` are sent too; only what is printed is kept.
#[derive(Debug, Deserialize)]
struct SearchResult {
    title: String,
    url: String,
    snippet: String,
    #[serde(default, deserialize_with = "string_or_null")]
    content: String,
    #[serde(default, deserialize_with = "string_or_null")]
    date: String,
}

/// An optional text field: `null` reads as empty, like a missing field.
fn string_or_null<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(deserializer)?.unwrap_or_default())
}

/// The `SearchWeb` tool.
#[derive(Debug)]
pub struct SearchWeb {
    spec: ToolSpec,
    service: ServiceConfig,
    client: LazyClient,
    user_agent: UserAgent,
    max_body_bytes: u64,
    share_dir: Option<PathBuf>,
}

impl SearchWeb {
    /// A `SearchWeb` using `[services.moonshot_search]`; `Ok(None)` when that is not configured (the
    /// tool is then not offered). Its HTTP client is built by the first search.
    pub fn new(settings: &WebSettings) -> Option<Self> {
        let service = settings.services.moonshot_search.as_ref()?;
        let limits = settings.limits;
        Some(Self {
            spec: crate::tool_spec::<SearchArgs>(NAME, include_str!("../descriptions/search_web.md")),
            service: service.clone(),
            client: client(Timeouts::SEARCH_SERVICE.capped(limits.timeout_cap)),
            user_agent: settings.user_agent.clone(),
            max_body_bytes: limits.max_body_bytes,
            share_dir: settings.share_dir.clone(),
        })
    }

    async fn run(self: Arc<Self>, args: SearchArgs, tool_call_id: String) -> ToolReturnValue {
        let out = OutputBuilder::with_limits(MAX_OUTPUT_CHARS, None);
        // Reference: an empty URL or key is "not configured"; a login's token is a key.
        let key = service_key(&self.service, self.share_dir.as_deref());
        if self.service.base_url.is_empty() || key.is_empty() {
            return out.error(
                "Search service is not configured. You may want to try other methods to search.",
                "Search service not configured",
            );
        }
        match self.search(&args, &key, &tool_call_id).await {
            Ok(results) => render(out, &results),
            Err(SearchError::Failed(Failure::Timeout)) => {
                tracing::warn!(query = %args.query, "SearchWeb request timed out");
                out.error(
                    "Search request timed out. The search service may be slow or unavailable.",
                    "Search request timed out",
                )
            }
            Err(SearchError::Failed(Failure::Network(e))) => {
                tracing::warn!(query = %args.query, error = %e, "SearchWeb network error");
                out.error(
                    &format!("Search request failed: {e}. The search service may be unavailable."),
                    "Search request failed",
                )
            }
            Err(SearchError::Status(status)) => {
                tracing::warn!(status, query = %args.query, "SearchWeb HTTP error");
                out.error(
                    &format!(
                        "Failed to search. Status: {status}. This may indicate that the search service is currently unavailable."
                    ),
                    "Failed to search",
                )
            }
            Err(SearchError::Parse(e)) => {
                tracing::warn!(query = %args.query, error = %e, "SearchWeb response parse error");
                out.error(
                    &format!(
                        "Failed to parse search results. Error: {e}. This may indicate that the search service is currently unavailable."
                    ),
                    "Failed to parse search results",
                )
            }
        }
    }

    async fn search(
        &self,
        args: &SearchArgs,
        key: &str,
        tool_call_id: &str,
    ) -> Result<Vec<SearchResult>, SearchError> {
        let headers = service_headers(
            &self.service,
            key,
            &self.user_agent,
            &[],
            tool_call_id,
            self.share_dir.as_deref(),
        );
        let client = self.client.get().map_err(|e| SearchError::Failed(e.into()))?;
        let response = client
            .post(&self.service.base_url)
            .headers(headers)
            .json(&json!({
                "text_query": args.query,
                "limit": args.limit,
                "enable_page_crawling": args.include_content,
                "timeout_seconds": SERVICE_TIMEOUT_SECONDS,
            }))
            .send()
            .await
            .map_err(|e| SearchError::Failed(e.into()))?;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(SearchError::Status(status));
        }
        let bytes = body::read_capped(response, self.max_body_bytes)
            .await
            .map_err(|e| match e {
                ReadError::Failed(failure) => SearchError::Failed(failure),
                ReadError::TooLarge => {
                    SearchError::Parse(format!("the answer is larger than {}", Size(self.max_body_bytes)))
                }
            })?;
        let response: SearchResponse =
            serde_json::from_slice(&bytes).map_err(|e| SearchError::Parse(e.to_string()))?;
        Ok(response.search_results)
    }
}

/// Why a search gave no results, in the reference's cases.
#[derive(Debug)]
enum SearchError {
    Failed(Failure),
    Status(u16),
    Parse(String),
}

/// The results as the reference prints them.
fn render(mut out: OutputBuilder, results: &[SearchResult]) -> ToolReturnValue {
    for (i, result) in results.iter().enumerate() {
        if i > 0 {
            out.write("---\n\n");
        }
        out.write(&format!(
            "Title: {}\nDate: {}\nURL: {}\nSummary: {}\n\n",
            result.title, result.date, result.url, result.snippet
        ));
        if !result.content.is_empty() {
            out.write(&format!("{}\n\n", result.content));
        }
    }
    out.ok("", "")
}

impl Tool for SearchWeb {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            let args: SearchArgs = parse_args(args)?;
            if args.limit < MIN_LIMIT {
                return Err(args::below_minimum("limit", MIN_LIMIT));
            }
            if args.limit > MAX_LIMIT {
                return Err(args::above_maximum("limit", MAX_LIMIT));
            }
            Ok(Plan::read_only(Box::pin(self.run(args, ctx.tool_call_id))))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::test_support::{call, service};
    use pretty_assertions::assert_eq;
    use wiremock::matchers::{body_json, header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    fn settings(url: &str, api_key: &str) -> WebSettings {
        let mut settings = WebSettings::default();
        settings.services.moonshot_search = Some(service(url, api_key));
        settings
    }

    fn tool(settings: &WebSettings) -> Arc<SearchWeb> {
        Arc::new(SearchWeb::new(settings).unwrap())
    }

    async fn answering(template: ResponseTemplate) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/search"))
            .respond_with(template)
            .mount(&server)
            .await;
        server
    }

    async fn search(server: &MockServer, args: Value) -> ToolReturnValue {
        let settings = settings(&format!("{}/search", server.uri()), "key");
        call(tool(&settings), args, "tc-9").await
    }

    #[test]
    fn only_built_with_a_search_service() {
        assert!(SearchWeb::new(&WebSettings::default()).is_none());
        assert!(SearchWeb::new(&settings("http://127.0.0.1:9/", "k")).is_some());
    }

    #[tokio::test]
    async fn the_request_and_the_results_have_the_reference_shape() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/search"))
            .and(header("authorization", "Bearer key"))
            .and(header("x-msh-tool-call-id", "tc-9"))
            .and(header("x-custom-header", "custom-value"))
            .and(body_json(json!({
                "text_query": "rust release",
                "limit": 2,
                "enable_page_crawling": true,
                "timeout_seconds": 30,
            })))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"search_results": [
                {"site_name": "Rust", "title": "Rust 1.88", "url": "https://blog.rust-lang.org/1.88",
                 "snippet": "Let chains.", "content": "Full text.", "date": "2025-06-26", "icon": "", "mime": ""},
                {"site_name": "Other", "title": "Second", "url": "https://example.com/2", "snippet": "More.",
                 "date": null},
            ]})))
            .expect(1)
            .mount(&server)
            .await;
        let value = search(
            &server,
            json!({"query": "rust release", "limit": 2, "include_content": true}),
        )
        .await;
        assert_eq!(
            value,
            ToolReturnValue::ok(
                "Title: Rust 1.88\nDate: 2025-06-26\nURL: https://blog.rust-lang.org/1.88\nSummary: Let chains.\n\n\
                 Full text.\n\n\
                 ---\n\n\
                 Title: Second\nDate: \nURL: https://example.com/2\nSummary: More.\n\n",
                ""
            )
        );
    }

    #[tokio::test]
    async fn defaults_ask_for_five_results_without_content() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(body_json(json!({
                "text_query": "q", "limit": 5, "enable_page_crawling": false, "timeout_seconds": 30,
            })))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"search_results": []})))
            .expect(1)
            .mount(&server)
            .await;
        let settings = settings(&server.uri(), "key");
        assert_eq!(
            call(tool(&settings), json!({"query": "q"}), "tc-1").await,
            ToolReturnValue::ok("", "")
        );
    }

    #[tokio::test]
    async fn service_failures_are_reported() {
        let server = answering(ResponseTemplate::new(503)).await;
        assert_eq!(
            search(&server, json!({"query": "q"})).await,
            ToolReturnValue::error(
                "",
                "Failed to search. Status: 503. This may indicate that the search service is currently unavailable.",
                "Failed to search"
            )
        );
        let server = answering(ResponseTemplate::new(200).set_body_json(json!({"results": []}))).await;
        let value = search(&server, json!({"query": "q"})).await;
        assert_eq!(
            value,
            ToolReturnValue::error(
                "",
                "Failed to parse search results. Error: missing field `search_results` at line 1 column 14. This may indicate that the search service is currently unavailable.",
                "Failed to parse search results"
            )
        );
    }

    #[tokio::test]
    async fn an_empty_key_means_not_configured() {
        let settings = settings("http://127.0.0.1:9/search", "");
        assert_eq!(
            call(tool(&settings), json!({"query": "q"}), "tc-1").await,
            ToolReturnValue::error(
                "",
                "Search service is not configured. You may want to try other methods to search.",
                "Search service not configured"
            )
        );
    }

    #[tokio::test]
    async fn the_limit_is_checked() {
        let settings = settings("http://127.0.0.1:9/search", "key");
        assert_eq!(
            call(tool(&settings), json!({"query": "q", "limit": 0}), "tc-1").await,
            args::below_minimum("limit", 1)
        );
        assert_eq!(
            call(tool(&settings), json!({"query": "q", "limit": 21}), "tc-1").await,
            args::above_maximum("limit", 20)
        );
        let missing = call(tool(&settings), json!({}), "tc-1").await;
        assert!(
            missing.message.starts_with("Error validating JSON arguments: "),
            "{missing:?}"
        );
    }

    #[test]
    fn the_schema_matches_the_reference() {
        let settings = settings("http://127.0.0.1:9/", "k");
        let schema = tool(&settings).spec().parameters.clone();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["query"]));
        let properties = &schema["properties"];
        assert_eq!(properties["query"]["type"], "string");
        let limit = &properties["limit"];
        assert_eq!(
            (
                &limit["type"],
                &limit["default"],
                &limit["minimum"],
                &limit["maximum"]
            ),
            (&json!("integer"), &json!(5), &json!(1), &json!(20))
        );
        assert!(limit.get("format").is_none());
        assert_eq!(properties["include_content"]["type"], "boolean");
        assert_eq!(properties["include_content"]["default"], false);
        let names: Vec<&String> = properties.as_object().unwrap().keys().collect();
        assert_eq!(names, ["query", "limit", "include_content"]);
    }
}
