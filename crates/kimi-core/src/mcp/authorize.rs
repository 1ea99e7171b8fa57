//! The interactive OAuth 2.1 authorization of one remote MCP server (`kimi-agent mcp auth`): the
//! authorization-code flow with PKCE, through rmcp's `auth` module.
//!
//! [`begin`] listens on a free loopback port (`http://127.0.0.1:<port>/callback` is the redirect URI),
//! discovers the server's authorization metadata (protected-resource metadata, then authorization-server
//! metadata, as rmcp does it), registers a client dynamically when the server offers registration, and
//! builds the authorization URL (rmcp makes the PKCE verifier and the `state`). The caller shows the URL;
//! [`PendingAuthorization::finish`] waits for the browser's redirect to the listener, checks `state`,
//! exchanges the code and stores the tokens through [`FileCredentialStore`].
//!
//! The listener answers one request at a time with a tiny page; requests for other paths (a browser's
//! favicon) get a 404 and the wait goes on. It is dropped (the port closed) when the flow ends.

use std::path::Path;
use std::time::Duration;

use rmcp::transport::auth::AuthorizationCallback;
use rmcp::transport::{AuthError, AuthorizationManager, AuthorizationRequest, AuthorizationSession};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::oauth::FileCredentialStore;

/// The name we register dynamically.
pub const CLIENT_NAME: &str = "kimi-agent";
/// How long the user has to finish in the browser (fastmcp's callback timeout).
pub const CALLBACK_TIMEOUT: Duration = Duration::from_secs(300);
/// Path of the redirect URI on the loopback listener.
const CALLBACK_PATH: &str = "/callback";
/// Longest request head the listener reads.
const MAX_REQUEST_HEAD: usize = 16 * 1024;
/// How long one connection to the listener may take to send its request.
const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the authorization did not complete. The texts are what `mcp auth` prints.
#[derive(Debug, thiserror::Error)]
pub enum AuthorizeError {
    /// The loopback listener could not be opened or failed.
    #[error("cannot listen for the authorization callback: {0}")]
    Listener(std::io::Error),
    /// Discovery, registration, the code exchange or storing the tokens failed.
    #[error("{0}")]
    OAuth(#[from] AuthError),
    /// The authorization server redirected back with an error.
    #[error("the authorization server answered {error}{}", .description.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Denied {
        /// OAuth `error` code (`access_denied`, ...).
        error: String,
        /// Its `error_description`, if any.
        description: Option<String>,
    },
    /// Nobody came back to the redirect URI in time.
    #[error("no authorization callback within {} seconds", .0.as_secs())]
    Timeout(Duration),
}

/// An authorization waiting for the browser.
pub struct PendingAuthorization {
    session: AuthorizationSession,
    listener: TcpListener,
}

impl std::fmt::Debug for PendingAuthorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingAuthorization")
            .field("redirect_uri", &self.session.redirect_uri)
            .finish_non_exhaustive()
    }
}

/// Starts authorizing with the MCP server at `server_url`; its tokens will be stored under `share_dir`.
pub async fn begin(share_dir: &Path, server_url: &str) -> Result<PendingAuthorization, AuthorizeError> {
    kimi_llm::install_tls_provider();
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(AuthorizeError::Listener)?;
    let port = listener.local_addr().map_err(AuthorizeError::Listener)?.port();
    let redirect_uri = format!("http://127.0.0.1:{port}{CALLBACK_PATH}");

    let mut manager = AuthorizationManager::new(server_url).await?;
    manager.set_credential_store(FileCredentialStore::new(share_dir, server_url));
    let resolution = manager.resolve_metadata().await?;
    tracing::debug!(source = ?resolution.source, "OAuth metadata resolved");
    manager.set_metadata(resolution.metadata);
    let request = AuthorizationRequest::new(redirect_uri)
        .with_client_name(CLIENT_NAME)
        .with_initial_scope_selection();
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| e)?;
    Ok(PendingAuthorization { session, listener })
}

impl PendingAuthorization {
    /// The URL the user opens in a browser.
    pub fn url(&self) -> &str {
        self.session.get_authorization_url()
    }

    /// The redirect URI the listener serves.
    pub fn redirect_uri(&self) -> &str {
        &self.session.redirect_uri
    }

    /// Waits (up to `timeout`) for the redirect, exchanges the code and stores the tokens.
    pub async fn finish(self, timeout: Duration) -> Result<(), AuthorizeError> {
        let callback_url = tokio::time::timeout(timeout, wait_for_callback(&self.listener))
            .await
            .map_err(|_| AuthorizeError::Timeout(timeout))??;
        let callback = parse_callback(&callback_url)?;
        self.session
            .handle_callback_with_issuer(&callback.code, &callback.csrf_token, callback.issuer.as_deref())
            .await?;
        Ok(())
    }
}

/// The redirect's parameters, or the error the authorization server sent back instead.
fn parse_callback(url: &str) -> Result<AuthorizationCallback, AuthorizeError> {
    let parsed = reqwest::Url::parse(url).map_err(AuthError::from)?;
    let param = |name: &str| {
        parsed
            .query_pairs()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.into_owned())
    };
    if let Some(error) = param("error") {
        return Err(AuthorizeError::Denied {
            error,
            description: param("error_description"),
        });
    }
    Ok(AuthorizationCallback::from_redirect_url(url)?)
}

/// Serves the listener until a request for the callback path arrives; returns its full URL.
async fn wait_for_callback(listener: &TcpListener) -> Result<String, AuthorizeError> {
    let base = format!(
        "http://{}",
        listener.local_addr().map_err(AuthorizeError::Listener)?
    );
    loop {
        let (mut stream, _) = listener.accept().await.map_err(AuthorizeError::Listener)?;
        let target = match tokio::time::timeout(REQUEST_READ_TIMEOUT, read_request_target(&mut stream)).await
        {
            Ok(Ok(target)) => target,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "ignoring a malformed request on the OAuth callback listener");
                continue;
            }
            Err(_) => continue,
        };
        let path = target.split('?').next().unwrap_or_default();
        if path != CALLBACK_PATH {
            respond(&mut stream, "404 Not Found", "Not found.").await;
            continue;
        }
        let url = format!("{base}{target}");
        let page = match parse_callback(&url) {
            Ok(_) => "Authorization complete. You can close this tab and return to kimi-agent.",
            Err(_) => "Authorization failed. Return to kimi-agent for details.",
        };
        respond(&mut stream, "200 OK", page).await;
        return Ok(url);
    }
}

/// Reads a request head and returns the target of its request line (`/callback?code=...`).
async fn read_request_target(stream: &mut TcpStream) -> std::io::Result<String> {
    let mut head = Vec::new();
    let mut chunk = [0_u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
        if head.len() > MAX_REQUEST_HEAD {
            return Err(std::io::Error::other("request head too long"));
        }
    }
    request_target(&head).ok_or_else(|| std::io::Error::other("not an HTTP GET request"))
}

/// The target of a `GET <target> HTTP/1.x` request line.
fn request_target(head: &[u8]) -> Option<String> {
    let line = head.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim_end_matches('\r');
    let mut parts = line.split(' ');
    let (Some("GET"), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    (target.starts_with('/') && version.starts_with("HTTP/")).then(|| target.to_owned())
}

async fn respond(stream: &mut TcpStream, status: &str, text: &str) {
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>kimi-agent</title></head><body><p>{text}</p></body></html>"
    );
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    // The browser's view is a courtesy; the flow does not depend on it arriving.
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_target_comes_from_a_get_line() {
        assert_eq!(
            request_target(b"GET /callback?code=c&state=s HTTP/1.1\r\nHost: x\r\n\r\n").as_deref(),
            Some("/callback?code=c&state=s")
        );
        assert_eq!(request_target(b"POST /callback HTTP/1.1\r\n\r\n"), None);
        assert_eq!(request_target(b"GET http://evil/ HTTP/1.1\r\n\r\n"), None);
        assert_eq!(request_target(b"garbage"), None);
    }

    #[test]
    fn a_callback_carries_code_and_state_or_the_servers_error() {
        let ok = parse_callback("http://127.0.0.1:1/callback?code=c&state=s").unwrap();
        assert_eq!((ok.code.as_str(), ok.csrf_token.as_str()), ("c", "s"));
        let denied = parse_callback(
            "http://127.0.0.1:1/callback?error=access_denied&error_description=no%20way&state=s",
        )
        .unwrap_err();
        assert_eq!(
            denied.to_string(),
            "the authorization server answered access_denied: no way"
        );
        assert!(parse_callback("http://127.0.0.1:1/callback?state=s").is_err());
    }

    #[tokio::test]
    async fn the_listener_skips_other_paths_and_returns_the_callback() {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let browser = tokio::spawn(async move {
            let mut answers = Vec::new();
            for target in ["/favicon.ico", "/callback?code=c&state=s"] {
                let mut stream = TcpStream::connect(addr).await.unwrap();
                stream
                    .write_all(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                    .await
                    .unwrap();
                let mut answer = String::new();
                stream.read_to_string(&mut answer).await.unwrap();
                answers.push(answer.lines().next().unwrap_or_default().to_owned());
            }
            answers
        });
        let url = wait_for_callback(&listener).await.unwrap();
        assert_eq!(url, format!("http://{addr}/callback?code=c&state=s"));
        assert_eq!(
            browser.await.unwrap(),
            ["HTTP/1.1 404 Not Found", "HTTP/1.1 200 OK"]
        );
    }
}
