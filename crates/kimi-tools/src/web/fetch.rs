//! `FetchURL`: reads a web page and returns its main content as text (reference
//! `kimi_cli/tools/web/fetch.py`).
//!
//! With `[services.moonshot_fetch]` configured, the URL is first sent to that service (`POST {"url"}`,
//! Markdown back); when it fails for any reason the tool logs why and fetches the page itself, as the
//! reference does. Fetching it itself is a GET with a browser's `User-Agent`, under the size and time
//! limits of [`WebLimits`]:
//! - HTML: the main content as Markdown with a metadata header (`extract`);
//! - text (plain, Markdown, JSON, XML, code...): passed through as it is;
//! - anything else (images, PDFs, archives...): an error saying so, without downloading it.
//!
//! Messages, briefs and the order of checks follow the reference; the content-type and size errors
//! are ours (docs/protocol.md lists them).
//!
//! Beyond the reference (docs/security.md): a fetch from a host not in `fetch_allowed_hosts` asks
//! first, under an action naming the host (so "approve for session" covers that host only), before
//! anything leaves, DNS included; and the page request never reaches a local-network address
//! (`guard`), on any hop, unless `fetch_allow_private_hosts` lists the host.

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use kimi_core::ServiceConfig;
use kimi_core::{ApprovalAsk, CallContext, Plan, Tool, parse_args};
use kimi_llm::http::LazyClient;
use kimi_llm::{ToolSpec, UserAgent};
use kimi_wire::message::ToolReturnValue;
use reqwest::header::{CONTENT_TYPE, USER_AGENT};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::body::{self, ContentType, Kind, ReadError, Size};
use super::extract;
use super::guard::{Guard, GuardedClient, HostList, PrivateAddress};
use super::{
    Failure, MAX_OUTPUT_CHARS, Timeouts, WebLimits, WebSettings, client, service_headers, service_key,
};
use crate::output::OutputBuilder;

/// The tool's name.
pub const NAME: &str = "FetchURL";

/// The `User-Agent` of page requests: many sites turn away clients that do not look like a browser
/// (the reference sends this one).
const BROWSER_USER_AGENT: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/91.0.4472.124 Safari/537.36";

const FULL_CONTENT: &str = "The returned content is the full content of the page.";
const MAIN_CONTENT: &str = "The returned content is the main text content extracted from the page.";
const SERVICE_CONTENT: &str = "The returned content is the main content extracted from the page.";

// Parameters of `FetchURL` (plain comments on the types: doc comments would become schema
// descriptions).
#[derive(Debug, Deserialize, JsonSchema)]
struct FetchArgs {
    /// Address of the page to read, with its scheme (http:// or https://).
    url: String,
}

/// The `FetchURL` tool.
#[derive(Debug)]
pub struct FetchURL {
    spec: ToolSpec,
    pages: GuardedClient,
    service: Option<FetchService>,
    max_body_bytes: u64,
    /// Hosts fetched without asking.
    allowed_hosts: HostList,
}

/// The approval action of a fetch from `host` (also the "approve for session" key: one per host).
fn fetch_action(host: &str) -> String {
    format!("fetch from {host}")
}

/// `[services.moonshot_fetch]` and what calling it takes.
#[derive(Debug)]
struct FetchService {
    config: ServiceConfig,
    client: LazyClient,
    user_agent: UserAgent,
    share_dir: Option<PathBuf>,
}

impl FetchURL {
    /// A `FetchURL` with the session's web settings. Its HTTP clients are built by the first fetch.
    pub fn new(settings: &WebSettings) -> Self {
        let WebLimits {
            max_body_bytes,
            timeout_cap,
        } = settings.limits;
        let service = settings
            .services
            .moonshot_fetch
            .as_ref()
            .map(|config| FetchService {
                config: config.clone(),
                client: client(Timeouts::FETCH_SERVICE.capped(timeout_cap)),
                user_agent: settings.user_agent.clone(),
                share_dir: settings.share_dir.clone(),
            });
        let guard = Guard {
            allow_private: settings.fetch_allow_private_hosts.clone(),
        };
        Self {
            spec: crate::tool_spec::<FetchArgs>(NAME, include_str!("../descriptions/fetch_url.md")),
            pages: GuardedClient::new(guard, Timeouts::PAGE.capped(timeout_cap)),
            service,
            max_body_bytes,
            allowed_hosts: settings.fetch_allowed_hosts.clone(),
        }
    }

    async fn run(self: Arc<Self>, url: String, tool_call_id: String) -> ToolReturnValue {
        if let Some(service) = &self.service {
            match service.fetch(&url, &tool_call_id, self.max_body_bytes).await {
                Ok(value) => return value,
                // Reference: any failure of the service falls back to fetching the page here.
                Err(reason) => tracing::warn!(%url, %reason, "Failed to fetch URL via service"),
            }
        }
        self.fetch_page(&url).await
    }

    /// GETs the page and turns it into text.
    async fn fetch_page(&self, url: &str) -> ToolReturnValue {
        let out = OutputBuilder::with_limits(MAX_OUTPUT_CHARS, None);
        let Some(target) = page_url(url) else {
            // Reference: aiohttp's error for a bad URL is the URL itself.
            return network_error(out, url);
        };
        if let Err(refused) = self.pages.guard().check_url(&target) {
            return private_refused(out, &refused);
        }
        let pages = match self.pages.get() {
            Ok(pages) => pages,
            Err(e) => return failed(out, url, e.into()),
        };
        let response = match pages
            .get(target)
            .header(USER_AGENT, BROWSER_USER_AGENT)
            .send()
            .await
        {
            Ok(response) => response,
            Err(e) => match PrivateAddress::find(&e) {
                Some(refused) => return private_refused(out, refused),
                None => return failed(out, url, e.into()),
            },
        };
        let status = response.status().as_u16();
        if status >= 400 {
            tracing::warn!(status, url, "FetchURL HTTP error");
            return out.error(
                &format!(
                    "Failed to fetch URL. Status: {status}. This may indicate the page is not accessible or the server is down."
                ),
                &format!("HTTP {status} error"),
            );
        }
        let content_type =
            ContentType::parse(response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()));
        let declared = content_type.declared();
        // Known not to be text: say so without downloading it.
        if let Some(Kind::NotText(what)) = &declared {
            return not_text(out, what);
        }
        let final_url = response.url().to_string();
        let bytes = match body::read_capped(response, self.max_body_bytes).await {
            Ok(bytes) => bytes,
            Err(ReadError::TooLarge) => return too_large(out, self.max_body_bytes),
            Err(ReadError::Failed(failure)) => return failed(out, url, failure),
        };
        // Reference order: declared text is returned even when empty; an empty page is not an error.
        if bytes.is_empty() && declared != Some(Kind::Text) {
            return out.ok("The response body is empty.", "Empty response body");
        }
        match declared.unwrap_or_else(|| content_type.kind(&bytes)) {
            Kind::Text => passthrough(out, &body::decode(&bytes, &content_type, false)),
            Kind::NotText(what) => not_text(out, &what),
            Kind::Html => {
                let html = body::decode(&bytes, &content_type, true);
                extracted(out, html, final_url).await
            }
        }
    }
}

impl FetchService {
    /// The page as the service returns it, or why the service could not be used.
    async fn fetch(
        &self,
        url: &str,
        tool_call_id: &str,
        max_body_bytes: u64,
    ) -> Result<ToolReturnValue, String> {
        // Reference: an empty key is "not configured"; a login's token is a key.
        let key = service_key(&self.config, self.share_dir.as_deref());
        if key.is_empty() {
            return Err(
                "Fetch service is not configured. You may want to try other methods to fetch.".to_owned(),
            );
        }
        let headers = service_headers(
            &self.config,
            &key,
            &self.user_agent,
            &[("Accept", "text/markdown")],
            tool_call_id,
            self.share_dir.as_deref(),
        );
        let client = self.client.get().map_err(|e| service_failure(e.into()))?;
        let response = client
            .post(&self.config.base_url)
            .headers(headers)
            .json(&json!({ "url": url }))
            .send()
            .await
            .map_err(|e| service_failure(e.into()))?;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(format!("Failed to fetch URL via service. Status: {status}."));
        }
        let content_type =
            ContentType::parse(response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()));
        let bytes = match body::read_capped(response, max_body_bytes).await {
            Ok(bytes) => bytes,
            Err(ReadError::TooLarge) => {
                return Err(format!(
                    "Failed to fetch URL via service: the answer is larger than {}.",
                    Size(max_body_bytes)
                ));
            }
            Err(ReadError::Failed(failure)) => return Err(service_failure(failure)),
        };
        let mut out = OutputBuilder::with_limits(MAX_OUTPUT_CHARS, None);
        out.write(&body::decode(&bytes, &content_type, false));
        Ok(out.ok(SERVICE_CONTENT, ""))
    }
}

impl Tool for FetchURL {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            let args: FetchArgs = parse_args(args)?;
            // A URL we could never fetch is refused when run, without a question (nothing is sent).
            let Some(target) = page_url(&args.url) else {
                return Ok(Plan::read_only(Box::pin(self.run(args.url, ctx.tool_call_id))));
            };
            if let Err(refused) = self.pages.guard().check_url(&target) {
                return Err(private_refused(
                    OutputBuilder::with_limits(MAX_OUTPUT_CHARS, None),
                    &refused,
                ));
            }
            let host = target.host_str().unwrap_or_default().to_owned();
            if self.allowed_hosts.contains(&host) {
                return Ok(Plan::read_only(Box::pin(self.run(args.url, ctx.tool_call_id))));
            }
            let ask = ApprovalAsk {
                action: fetch_action(&host),
                description: format!("Fetch `{}`", args.url),
                display: Vec::new(),
                detail_display: Vec::new(),
                writes: Vec::new(),
            };
            Ok(Plan::side_effect(
                ask,
                Box::pin(self.run(args.url, ctx.tool_call_id)),
            ))
        })
    }
}

/// `url` when it is an `http`/`https` URL with a host, the only kind FetchURL reads.
fn page_url(url: &str) -> Option<reqwest::Url> {
    reqwest::Url::parse(url)
        .ok()
        .filter(|parsed| matches!(parsed.scheme(), "http" | "https") && parsed.has_host())
}

/// The refusal of a local-network address.
fn private_refused(out: OutputBuilder, refused: &PrivateAddress) -> ToolReturnValue {
    tracing::warn!(host = %refused.host, address = %refused.address, "FetchURL refused a local-network address");
    out.error(&format!("Failed to fetch URL: {refused}."), "Private address")
}

fn service_failure(failure: Failure) -> String {
    match failure {
        Failure::Timeout => "Failed to fetch URL via service: request timed out.".to_owned(),
        Failure::Network(e) => format!(
            "Failed to fetch URL via service due to network error: {e}. This may indicate the service is unreachable."
        ),
    }
}

/// Text that needs no extraction, returned whole (within the output cap).
fn passthrough(mut out: OutputBuilder, text: &str) -> ToolReturnValue {
    out.write(text);
    out.ok(FULL_CONTENT, "")
}

/// The main content of an HTML page; parsing runs on a blocking thread.
async fn extracted(mut out: OutputBuilder, html: String, url: String) -> ToolReturnValue {
    let content = tokio::task::spawn_blocking(move || extract::main_content(&html, &url))
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "FetchURL extraction failed");
            None
        });
    match content {
        Some(text) => {
            out.write(&text);
            out.ok(MAIN_CONTENT, "")
        }
        None => out.error(
            "Failed to extract meaningful content from the page. This may indicate the page content is not suitable for text extraction, or the page requires JavaScript to render its content.",
            "No content extracted",
        ),
    }
}

fn failed(out: OutputBuilder, url: &str, failure: Failure) -> ToolReturnValue {
    match failure {
        Failure::Timeout => {
            tracing::warn!(url, "FetchURL timed out");
            out.error(
                "Failed to fetch URL: request timed out. The server may be slow or unreachable.",
                "Request timed out",
            )
        }
        Failure::Network(e) => {
            tracing::warn!(url, error = %e, "FetchURL network error");
            network_error(out, &e)
        }
    }
}

fn network_error(out: OutputBuilder, detail: &str) -> ToolReturnValue {
    out.error(
        &format!(
            "Failed to fetch URL due to network error: {detail}. This may indicate the URL is invalid or the server is unreachable."
        ),
        "Network error",
    )
}

fn not_text(out: OutputBuilder, content_type: &str) -> ToolReturnValue {
    out.error(
        &format!(
            "Failed to fetch URL: the response is not text (content type: {content_type}). FetchURL reads web pages and text documents only."
        ),
        "Unsupported content type",
    )
}

fn too_large(out: OutputBuilder, max_body_bytes: u64) -> ToolReturnValue {
    out.error(
        &format!(
            "Failed to fetch URL: the response body is larger than {}, the most FetchURL reads.",
            Size(max_body_bytes)
        ),
        "Response too large",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::test_support::{call, limits, service, text_of};
    use pretty_assertions::assert_eq;
    use std::time::Duration;
    use wiremock::matchers::{body_json, header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    /// Settings under which the local mock servers are reachable without a question.
    fn local() -> WebSettings {
        WebSettings {
            fetch_allowed_hosts: HostList::new(["127.0.0.1"]),
            fetch_allow_private_hosts: HostList::new(["127.0.0.1"]),
            ..WebSettings::default()
        }
    }

    fn tool(settings: &WebSettings) -> Arc<FetchURL> {
        Arc::new(FetchURL::new(settings))
    }

    async fn serve(template: ResponseTemplate) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/page"))
            .respond_with(template)
            .mount(&server)
            .await;
        server
    }

    async fn fetch(settings: &WebSettings, url: &str) -> ToolReturnValue {
        call(tool(settings), json!({ "url": url }), "tc-1").await
    }

    fn page(content_type: &str, body: impl Into<Vec<u8>>) -> ResponseTemplate {
        ResponseTemplate::new(200).set_body_raw(body.into(), content_type)
    }

    const ARTICLE: &str = "<html><head><title>Notes</title></head><body><nav>Menu</nav><article>\
        <h1>Notes</h1><p>A paragraph long enough to be the main content of this small page, with a \
        <a href=\"/more\">link</a> and <code>code</code> in it, so Readability keeps it.</p>\
        <h2>Part two</h2><p>More text that belongs to the article and not to the navigation.</p>\
        </article></body></html>";

    #[tokio::test]
    async fn html_becomes_markdown() {
        let server = serve(page("text/html; charset=utf-8", ARTICLE)).await;
        let url = format!("{}/page", server.uri());
        let value = fetch(&local(), &url).await;
        assert!(!value.is_error, "{value:?}");
        assert_eq!(value.message, MAIN_CONTENT);
        assert!(value.display.is_empty());
        let text = text_of(&value);
        assert!(
            text.starts_with(&format!("---\ntitle: Notes\nurl: {url}\n---\n")),
            "{text}"
        );
        assert!(text.contains("## Part two"), "{text}");
        assert!(text.contains(&format!("[link]({}/more)", server.uri())), "{text}");
        assert!(!text.contains("Menu") && !text.contains("<p>"), "{text}");
    }

    #[tokio::test]
    async fn text_and_markdown_pass_through() {
        let markdown = "---\ntitle: Doc\n---\n\n# Title\n\n<div><p>Some html</p></div>\n";
        let server = serve(page("text/markdown; charset=utf-8", markdown)).await;
        let value = fetch(&local(), &format!("{}/page", server.uri())).await;
        assert_eq!(value, ToolReturnValue::ok(markdown, FULL_CONTENT));

        let server = serve(page("text/plain; charset=iso-8859-1", b"caf\xe9\n".to_vec())).await;
        let value = fetch(&local(), &format!("{}/page", server.uri())).await;
        assert_eq!(value, ToolReturnValue::ok("café\n", FULL_CONTENT));

        // Declared text is returned even when empty (reference order).
        let server = serve(page("text/plain", "")).await;
        let value = fetch(&local(), &format!("{}/page", server.uri())).await;
        assert_eq!(value, ToolReturnValue::ok("", FULL_CONTENT));
    }

    #[tokio::test]
    async fn an_empty_page_is_not_an_error() {
        let server = serve(page("text/html", "")).await;
        let value = fetch(&local(), &format!("{}/page", server.uri())).await;
        assert_eq!(
            value,
            ToolReturnValue::ok_with_brief("", "The response body is empty.", "Empty response body")
        );
    }

    #[tokio::test]
    async fn a_page_without_text_is_an_error() {
        let html = "<html><body><div id=\"app\"></div><script>render()</script></body></html>";
        let server = serve(page("text/html", html)).await;
        let value = fetch(&local(), &format!("{}/page", server.uri())).await;
        assert_eq!(
            value,
            ToolReturnValue::error(
                "",
                "Failed to extract meaningful content from the page. This may indicate the page content is not suitable for text extraction, or the page requires JavaScript to render its content.",
                "No content extracted"
            )
        );
    }

    #[tokio::test]
    async fn binary_content_is_refused() {
        let server = serve(page("image/png", b"\x89PNG\r\n\x1a\n\x00\x00".to_vec())).await;
        let value = fetch(&local(), &format!("{}/page", server.uri())).await;
        assert_eq!(
            value,
            ToolReturnValue::error(
                "",
                "Failed to fetch URL: the response is not text (content type: image/png). FetchURL reads web pages and text documents only.",
                "Unsupported content type"
            )
        );
        // Without a type, the bytes tell.
        let server = serve(ResponseTemplate::new(200).set_body_bytes(b"\x00\x01\x02".to_vec())).await;
        let value = fetch(&local(), &format!("{}/page", server.uri())).await;
        assert!(value.is_error);
        assert!(
            value
                .message
                .contains("(content type: none, and the body looks binary)"),
            "{}",
            value.message
        );
        // ... and text without a type is text.
        let server = serve(ResponseTemplate::new(200).set_body_bytes(b"plain words".to_vec())).await;
        let value = fetch(&local(), &format!("{}/page", server.uri())).await;
        assert_eq!(value, ToolReturnValue::ok("plain words", FULL_CONTENT));
    }

    #[tokio::test]
    async fn http_errors_give_the_status() {
        let server = serve(ResponseTemplate::new(404).set_body_string("gone")).await;
        let value = fetch(&local(), &format!("{}/page", server.uri())).await;
        assert_eq!(
            value,
            ToolReturnValue::error(
                "",
                "Failed to fetch URL. Status: 404. This may indicate the page is not accessible or the server is down.",
                "HTTP 404 error"
            )
        );
    }

    #[tokio::test]
    async fn bad_urls_are_network_errors_naming_the_url() {
        let settings = local();
        for url in [
            "not-a-valid-url",
            "",
            "ftp://example.com/file",
            "file:///etc/passwd",
        ] {
            assert_eq!(
                fetch(&settings, url).await,
                ToolReturnValue::error(
                    "",
                    format!(
                        "Failed to fetch URL due to network error: {url}. This may indicate the URL is invalid or the server is unreachable."
                    ),
                    "Network error"
                ),
                "{url}"
            );
        }
    }

    #[tokio::test]
    async fn an_unreachable_server_is_a_network_error() {
        // A port nothing listens on: bind one, then free it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let value = fetch(&local(), &format!("http://127.0.0.1:{port}/")).await;
        assert!(value.is_error);
        assert!(
            value
                .message
                .starts_with("Failed to fetch URL due to network error: error sending request"),
            "{}",
            value.message
        );
        assert_eq!(
            value.display,
            ToolReturnValue::error("", "", "Network error").display
        );
    }

    #[tokio::test]
    async fn oversized_bodies_are_refused() {
        let settings = WebSettings {
            limits: limits(1024, None),
            ..local()
        };
        let server = serve(page("text/plain", vec![b'a'; 1025])).await;
        let value = fetch(&settings, &format!("{}/page", server.uri())).await;
        assert_eq!(
            value,
            ToolReturnValue::error(
                "",
                "Failed to fetch URL: the response body is larger than 1 KiB, the most FetchURL reads.",
                "Response too large"
            )
        );
        let server = serve(page("text/plain", vec![b'a'; 1024])).await;
        let value = fetch(&settings, &format!("{}/page", server.uri())).await;
        assert!(!value.is_error);
    }

    #[tokio::test]
    async fn an_undeclared_length_is_capped_while_reading() {
        // Chunked encoding: no Content-Length to refuse early.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            let chunk = "x".repeat(600);
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n\
                 258\r\n{chunk}\r\n258\r\n{chunk}\r\n0\r\n\r\n"
            );
            let _ = socket.write_all(response.as_bytes()).await;
        });
        let settings = WebSettings {
            limits: limits(1000, None),
            ..local()
        };
        let value = fetch(&settings, &format!("http://{address}/")).await;
        assert_eq!(
            value.display,
            ToolReturnValue::error("", "", "Response too large").display
        );
    }

    #[tokio::test]
    async fn a_slow_server_times_out() {
        let server = serve(page("text/plain", "late").set_delay(Duration::from_secs(5))).await;
        let settings = WebSettings {
            limits: limits(1024, Some(Duration::from_millis(200))),
            ..local()
        };
        let value = fetch(&settings, &format!("{}/page", server.uri())).await;
        assert_eq!(
            value,
            ToolReturnValue::error(
                "",
                "Failed to fetch URL: request timed out. The server may be slow or unreachable.",
                "Request timed out"
            )
        );
    }

    #[tokio::test]
    async fn the_fetch_service_is_asked_first() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/fetch"))
            .and(header("authorization", "Bearer test-key"))
            .and(header("accept", "text/markdown"))
            .and(header("x-msh-tool-call-id", "tc-1"))
            .and(header("x-custom-header", "custom-value"))
            .and(body_json(json!({"url": "http://127.0.0.1:9/article"})))
            .respond_with(
                ResponseTemplate::new(200).set_body_string("# Service Content\n\nFrom the service."),
            )
            .expect(1)
            .mount(&server)
            .await;
        let mut settings = local();
        settings.services.moonshot_fetch = Some(service(&format!("{}/fetch", server.uri()), "test-key"));
        let value = fetch(&settings, "http://127.0.0.1:9/article").await;
        assert_eq!(
            value,
            ToolReturnValue::ok("# Service Content\n\nFrom the service.", SERVICE_CONTENT)
        );
    }

    #[tokio::test]
    async fn a_failing_fetch_service_falls_back_to_the_page() {
        let server = serve(page("text/plain", "direct")).await;
        Mock::given(method("POST"))
            .and(path("/fetch"))
            .respond_with(ResponseTemplate::new(500))
            .expect(1)
            .mount(&server)
            .await;
        let mut settings = local();
        settings.services.moonshot_fetch = Some(service(&format!("{}/fetch", server.uri()), "key"));
        let value = fetch(&settings, &format!("{}/page", server.uri())).await;
        assert_eq!(value, ToolReturnValue::ok("direct", FULL_CONTENT));

        // Without a key the service is not even called.
        settings.services.moonshot_fetch = Some(service("http://127.0.0.1:9/never", ""));
        let value = fetch(&settings, &format!("{}/page", server.uri())).await;
        assert_eq!(value, ToolReturnValue::ok("direct", FULL_CONTENT));
    }

    #[tokio::test]
    async fn local_network_addresses_are_refused_in_every_spelling() {
        let settings = WebSettings::default();
        for url in [
            "http://127.0.0.1:9/collect?d=key",
            "http://[::1]/",
            "http://2130706433/",
            "http://127.1/",
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.1/",
            "http://[fd00::1]/",
        ] {
            let plan = tool(&settings)
                .plan(
                    json!({ "url": url }),
                    CallContext::new("tc-1", None, Default::default()),
                )
                .await;
            let refused = plan.err().unwrap_or_else(|| panic!("{url} was not refused"));
            assert_eq!(refused.brief(), "Private address", "{url}");
            assert!(
                refused.message.contains("fetch_allow_private_hosts"),
                "{}",
                refused.message
            );
        }
    }

    #[tokio::test]
    async fn names_and_redirects_to_local_addresses_are_refused_when_run() {
        // The mock server is allowed to be asked (it is the "public" host here), but it redirects to
        // loopback, which is not allowed.
        let server = serve(ResponseTemplate::new(302).insert_header("location", "http://[::1]:9/")).await;
        let settings = WebSettings {
            fetch_allow_private_hosts: HostList::new(["127.0.0.1"]),
            ..WebSettings::default()
        };
        let value = tool(&settings)
            .run(format!("{}/page", server.uri()), "tc-1".into())
            .await;
        assert_eq!(value.brief(), "Private address", "{value:?}");
        assert!(value.message.contains("[::1]"), "{}", value.message);
        let value = tool(&WebSettings::default())
            .run("http://localhost:9/".into(), "tc-1".into())
            .await;
        assert_eq!(value.brief(), "Private address", "{value:?}");
    }

    #[tokio::test]
    async fn a_host_not_allowed_asks_by_host() {
        let plan = tool(&WebSettings::default())
            .plan(
                json!({ "url": "https://Example.COM/a?q=1" }),
                CallContext::new("tc-1", None, Default::default()),
            )
            .await
            .unwrap();
        assert_eq!(
            plan.effect,
            kimi_core::Effect::SideEffect(ApprovalAsk {
                action: "fetch from example.com".into(),
                description: "Fetch `https://Example.COM/a?q=1`".into(),
                display: Vec::new(),
                detail_display: Vec::new(),
                writes: Vec::new(),
            })
        );
        let settings = WebSettings {
            fetch_allowed_hosts: HostList::new(["*.example.com"]),
            ..WebSettings::default()
        };
        let plan = tool(&settings)
            .plan(
                json!({ "url": "https://docs.example.com/" }),
                CallContext::new("tc-1", None, Default::default()),
            )
            .await
            .unwrap();
        assert_eq!(plan.effect, kimi_core::Effect::ReadOnly);
    }

    #[test]
    fn the_schema_matches_the_reference() {
        let tool = tool(&local());
        let schema = &tool.spec().parameters;
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["url"]));
        assert_eq!(schema["properties"]["url"]["type"], "string");
        assert!(schema["properties"]["url"]["description"].is_string());
        assert_eq!(tool.spec().name, "FetchURL");
    }
}
