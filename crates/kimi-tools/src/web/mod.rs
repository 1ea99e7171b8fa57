//! The web tools: [`FetchURL`] reads a page as text, [`SearchWeb`] asks the configured search service.
//!
//! Both follow the reference's `kimi_cli/tools/web/` in parameters, request shapes and every message the
//! model or a client can see; descriptions are our own (`descriptions/fetch_url.md`, `search_web.md`).
//! SearchWeb only asks the configured service, so it needs no approval (as the reference); FetchURL
//! asks per host and never reaches the local network unless allowed (see `fetch`, `guard`).
//!
//! Layout:
//! - `fetch`: FetchURL: `[services.moonshot_fetch]` first when configured, else (or when it fails) a
//!   plain GET of the page.
//! - `search`: SearchWeb, built only when `[services.moonshot_search]` is configured.
//! - `body`: a response read under a size cap, classified (HTML, text, not text) and decoded.
//! - `extract`: the main content of an HTML page as Markdown.
//! - `guard`: which addresses a page request may reach (resolver, redirect policy, host lists).
//! - this file: [`WebSettings`] (what the tools get from the session), the time limits of each kind of
//!   request and the shared HTTP pieces.
//!
//! Every request goes through the workspace's `reqwest` (rustls, ring installed by
//! [`kimi_llm::install_tls_provider`]); nothing here opens sockets another way.

mod body;
mod extract;
mod fetch;
mod guard;
mod search;

use std::path::{Path, PathBuf};
use std::time::Duration;

use kimi_core::{ServiceConfig, Services};
use kimi_llm::UserAgent;
use kimi_llm::http::{ClientTimeouts, LazyClient};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue, USER_AGENT};

pub use fetch::{FetchURL, NAME as FETCH_NAME};
pub use guard::HostList;
pub use search::{NAME as SEARCH_NAME, SearchWeb};

/// Environment variable capping every web request's time, in milliseconds (for slow links, and for
/// tests that cannot wait a minute for a timeout).
pub const TIMEOUT_ENV: &str = "KIMI_AGENT_WEB_TIMEOUT_MS";

/// Environment variable replacing [`DEFAULT_MAX_BODY_BYTES`].
pub const MAX_BYTES_ENV: &str = "KIMI_AGENT_WEB_MAX_BYTES";

/// Largest response body read, in bytes. The reference reads any size; a page past this is not something
/// a model can use whole, and reading it could exhaust memory.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 10 * 1024 * 1024;

/// Characters of output kept of one call: far above the model's budget, so the toolset can save the
/// whole page for the model to page through (as for Shell), yet bounded.
const MAX_OUTPUT_CHARS: usize = 1_000_000;

/// The header carrying the model's tool call id to the Moonshot services (reference).
const TOOL_CALL_ID_HEADER: &str = "X-Msh-Tool-Call-Id";

/// What the web tools take from the session.
#[derive(Debug, Clone)]
pub struct WebSettings {
    /// `[services]` of the configuration.
    pub services: Services,
    /// Sent to the Moonshot services (pages get a browser's, see `fetch`).
    pub user_agent: UserAgent,
    /// Size and time limits.
    pub limits: WebLimits,
    /// Hosts FetchURL reads without asking (`fetch_allowed_hosts`).
    pub fetch_allowed_hosts: HostList,
    /// Hosts FetchURL may reach on a local-network address (`fetch_allow_private_hosts`).
    pub fetch_allow_private_hosts: HostList,
    /// The share directory: where a service's login token and the device id are read. Without it the
    /// services get their `api_key` and no device headers.
    pub share_dir: Option<PathBuf>,
}

impl Default for WebSettings {
    fn default() -> Self {
        Self {
            services: Services::default(),
            user_agent: UserAgent::ours(),
            limits: WebLimits::default(),
            fetch_allowed_hosts: HostList::default(),
            fetch_allow_private_hosts: HostList::default(),
            share_dir: None,
        }
    }
}

/// Size and time limits shared by every web request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebLimits {
    /// Largest body read, in bytes.
    pub max_body_bytes: u64,
    /// When set, no timeout of any request is longer than this.
    pub timeout_cap: Option<Duration>,
}

impl Default for WebLimits {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            timeout_cap: None,
        }
    }
}

impl WebLimits {
    /// The defaults with [`TIMEOUT_ENV`] and [`MAX_BYTES_ENV`] applied; values that are not positive
    /// integers are ignored (with a warning).
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let positive = |name: &str| {
            let value = lookup(name)?;
            match value.trim().parse::<u64>() {
                Ok(n) if n > 0 => Some(n),
                _ => {
                    tracing::warn!(variable = name, value = %value, "ignored: not a positive integer");
                    None
                }
            }
        };
        let defaults = Self::default();
        Self {
            max_body_bytes: positive(MAX_BYTES_ENV).unwrap_or(defaults.max_body_bytes),
            timeout_cap: positive(TIMEOUT_ENV).map(Duration::from_millis),
        }
    }
}

/// The time limits of one kind of request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Timeouts {
    /// Opening the connection.
    connect: Duration,
    /// Waiting for the next bytes of the answer.
    read: Duration,
    /// The whole request, body included.
    total: Duration,
}

impl Timeouts {
    /// Fetching a page: large or slow sites take a while (reference: 15 s / 60 s / 180 s).
    const PAGE: Self = Self::secs(15, 60, 180);
    /// The fetch service (reference: aiohttp's defaults in `new_client_session`, 15 s / 60 s / 120 s).
    const FETCH_SERVICE: Self = Self::secs(15, 60, 120);
    /// The search service: it crawls pages when asked for their content (reference: 15 s / 90 s / 180 s).
    const SEARCH_SERVICE: Self = Self::secs(15, 90, 180);

    const fn secs(connect: u64, read: u64, total: u64) -> Self {
        Self {
            connect: Duration::from_secs(connect),
            read: Duration::from_secs(read),
            total: Duration::from_secs(total),
        }
    }

    fn capped(self, cap: Option<Duration>) -> Self {
        let Some(cap) = cap else { return self };
        Self {
            connect: self.connect.min(cap),
            read: self.read.min(cap),
            total: self.total.min(cap),
        }
    }
}

/// A client for one kind of request, built on its first use. Redirects are followed (up to reqwest's
/// 10), as aiohttp does.
const fn client(timeouts: Timeouts) -> LazyClient {
    LazyClient::new(ClientTimeouts {
        connect: Some(timeouts.connect),
        read: Some(timeouts.read),
        total: Some(timeouts.total),
    })
}

/// The bearer key of `service`: its login's stored token when it names one (and a share dir is known),
/// else its `api_key`; empty when it has neither (the service is then "not configured").
fn service_key(service: &ServiceConfig, share_dir: Option<&Path>) -> String {
    match share_dir {
        Some(share_dir) => kimi_core::service_key(&service.api_key, service.oauth.as_ref(), share_dir),
        None => service.api_key.expose().to_owned(),
    }
}

/// The headers of a call to a Moonshot service, in the reference's order (later ones win):
/// `User-Agent`, `Authorization: Bearer <key>`, the tool's `extra` ones, the tool call id, the device
/// headers (`X-Msh-*`, with a share dir), then the configured `custom_headers`. Headers that are not
/// valid HTTP are left out with a warning.
fn service_headers(
    service: &ServiceConfig,
    key: &str,
    user_agent: &UserAgent,
    extra: &[(&str, &str)],
    tool_call_id: &str,
    share_dir: Option<&Path>,
) -> HeaderMap {
    let mut headers = HeaderMap::new();
    put(&mut headers, USER_AGENT.as_str(), &user_agent.get());
    put(&mut headers, AUTHORIZATION.as_str(), &format!("Bearer {key}"));
    for (name, value) in extra {
        put(&mut headers, name, value);
    }
    put(&mut headers, TOOL_CALL_ID_HEADER, tool_call_id);
    if let Some(share_dir) = share_dir {
        headers.extend(kimi_core::device_headers(share_dir));
    }
    for (name, value) in service.custom_headers.iter().flatten() {
        put(&mut headers, name, value);
    }
    headers
}

/// Sets header `name` to `value`; one that is not valid HTTP is left out with a warning.
fn put(headers: &mut HeaderMap, name: &str, value: &str) {
    match (
        HeaderName::from_bytes(name.as_bytes()),
        HeaderValue::from_str(value),
    ) {
        (Ok(name), Ok(value)) => {
            headers.insert(name, value);
        }
        _ => tracing::warn!(header = name, "invalid header for a web service; left out"),
    }
}

/// How a request failed before a status came back, in the two kinds the reference tells apart.
#[derive(Debug)]
enum Failure {
    /// A timeout, of the connection, a read or the whole request.
    Timeout,
    /// Anything else: refused, reset, DNS, TLS, a broken body. The text has every cause.
    Network(String),
}

impl From<reqwest::Error> for Failure {
    fn from(error: reqwest::Error) -> Self {
        if error.is_timeout() {
            Self::Timeout
        } else {
            Self::Network(kimi_llm::error_chain(&error))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kimi_core::Secret;
    use pretty_assertions::assert_eq;
    use std::collections::{BTreeMap, HashMap};

    #[test]
    fn limits_read_the_environment() {
        let env: HashMap<&str, &str> = HashMap::from([(TIMEOUT_ENV, "250"), (MAX_BYTES_ENV, " 4096 ")]);
        let limits = WebLimits::from_env(|k| env.get(k).map(|v| (*v).to_owned()));
        assert_eq!(
            limits,
            WebLimits {
                max_body_bytes: 4096,
                timeout_cap: Some(Duration::from_millis(250)),
            }
        );
        let bad: HashMap<&str, &str> = HashMap::from([(TIMEOUT_ENV, "0"), (MAX_BYTES_ENV, "lots")]);
        assert_eq!(
            WebLimits::from_env(|k| bad.get(k).map(|v| (*v).to_owned())),
            WebLimits::default()
        );
    }

    #[test]
    fn a_cap_shortens_every_timeout() {
        let capped = Timeouts::PAGE.capped(Some(Duration::from_secs(30)));
        assert_eq!(capped, Timeouts::secs(15, 30, 30));
        assert_eq!(Timeouts::SEARCH_SERVICE.capped(None), Timeouts::SEARCH_SERVICE);
    }

    #[test]
    fn service_headers_end_with_the_custom_ones() {
        let service = ServiceConfig {
            base_url: "http://localhost/".into(),
            api_key: Secret::new("key"),
            custom_headers: Some(BTreeMap::from([
                ("X-Custom".to_owned(), "yes".to_owned()),
                ("Authorization".to_owned(), "Token other".to_owned()),
                ("Bad Name".to_owned(), "x".to_owned()),
            ])),
            oauth: None,
        };
        let headers = service_headers(
            &service,
            "key",
            &UserAgent::new("ua/1"),
            &[("Accept", "text/markdown")],
            "tc-1",
            None,
        );
        let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        assert_eq!(get("user-agent"), Some("ua/1"));
        assert_eq!(get("x-msh-tool-call-id"), Some("tc-1"));
        assert_eq!(get("accept"), Some("text/markdown"));
        assert_eq!(get("x-custom"), Some("yes"));
        // Reference: custom headers are merged last, so they may replace ours.
        assert_eq!(get("authorization"), Some("Token other"));
        assert_eq!(headers.len(), 5);
    }
}

/// Shared by the tests of the web tools.
#[cfg(test)]
mod test_support {
    use std::sync::Arc;
    use std::time::Duration;

    use kimi_core::{CallContext, Effect, Tool};
    use kimi_core::{Secret, ServiceConfig};
    use kimi_wire::message::{ToolOutput, ToolReturnValue};
    use serde_json::Value;
    use tokio_util::sync::CancellationToken;

    use super::WebLimits;

    /// Plans and runs one call; web calls are read-only.
    pub(super) async fn call(tool: Arc<dyn Tool>, args: Value, id: &str) -> ToolReturnValue {
        let ctx = CallContext::new(id, None, CancellationToken::new());
        match tool.plan(args, ctx).await {
            Ok(plan) => {
                assert_eq!(plan.effect, Effect::ReadOnly);
                plan.run.await
            }
            Err(value) => value,
        }
    }

    /// The text output of a result.
    pub(super) fn text_of(value: &ToolReturnValue) -> &str {
        match &value.output {
            ToolOutput::Text(text) => text,
            ToolOutput::Parts(parts) => panic!("expected text output, got {parts:?}"),
        }
    }

    pub(super) fn limits(max_body_bytes: u64, timeout_cap: Option<Duration>) -> WebLimits {
        WebLimits {
            max_body_bytes,
            timeout_cap,
        }
    }

    /// A service at `url` with `api_key` and one custom header.
    pub(super) fn service(url: &str, api_key: &str) -> ServiceConfig {
        ServiceConfig {
            base_url: url.to_owned(),
            api_key: Secret::new(api_key),
            custom_headers: Some([("X-Custom-Header".to_owned(), "custom-value".to_owned())].into()),
            oauth: None,
        }
    }
}
