//! `mcp_test_server oauth`: the HTTP server also plays an OAuth 2.1 authorization server for itself, and
//! `/mcp` wants a bearer token it issued.
//!
//! Endpoints: protected-resource metadata (`/.well-known/oauth-protected-resource[/mcp]`),
//! authorization-server metadata (`/.well-known/oauth-authorization-server`), dynamic registration
//! (`POST /register`), `GET /authorize` (approves at once: 302 to the redirect URI with a code, as a
//! browser would see after the user clicked "allow") and `POST /token` (authorization code with a checked
//! PKCE S256 verifier, or refresh token).
//!
//! Switches (environment): `MCP_TEST_OAUTH_EXPIRES_IN=N` (seconds, default 3600) for issued tokens;
//! `MCP_TEST_OAUTH_REFRESH=reject` answers every refresh with `invalid_grant`. Any refresh token starting
//! with `refresh-` is accepted otherwise, so a test can hand the client a token this instance never issued.
//! `MCP_TEST_TOKEN_GATE=FIFO` opens this named pipe before answering `POST /token`, so a test decides
//! when a refresh completes (the turn's "still loading" status is then a state, not a race).

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::Mutex;

use base64::Engine;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};
use sha2::Digest;

type Reply = Response<BoxBody<Bytes, Infallible>>;

struct Grant {
    client_id: String,
    redirect_uri: String,
    challenge: String,
}

#[derive(Default)]
struct Issued {
    /// Registered client id -> its redirect URIs.
    clients: HashMap<String, Vec<String>>,
    codes: HashMap<String, Grant>,
    access_tokens: HashSet<String>,
    counter: u64,
}

pub struct AuthServer {
    base: String,
    expires_in: u64,
    reject_refresh: bool,
    issued: Mutex<Issued>,
}

fn reply(status: StatusCode, body: Value) -> Reply {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

fn oauth_error(error: &str) -> Reply {
    reply(StatusCode::BAD_REQUEST, json!({"error": error}))
}

fn params(text: &str) -> HashMap<String, String> {
    form_urlencoded::parse(text.as_bytes()).into_owned().collect()
}

impl AuthServer {
    /// The authorization server of the MCP endpoint `{base}/mcp`.
    pub fn new(base: String) -> Self {
        Self {
            base,
            expires_in: std::env::var("MCP_TEST_OAUTH_EXPIRES_IN")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(3600),
            reject_refresh: std::env::var("MCP_TEST_OAUTH_REFRESH").as_deref() == Ok("reject"),
            issued: Mutex::new(Issued::default()),
        }
    }

    fn issued(&self) -> std::sync::MutexGuard<'_, Issued> {
        kimi_wire::sync::lock(&self.issued)
    }

    /// Answers OAuth requests and unauthorized MCP requests; hands an authorized MCP request back.
    pub async fn route(&self, request: Request<Incoming>) -> Result<Reply, Request<Incoming>> {
        let path = request.uri().path().to_owned();
        let query = request.uri().query().unwrap_or_default().to_owned();
        match (request.method().as_str(), path.as_str()) {
            (
                "GET",
                "/.well-known/oauth-protected-resource" | "/.well-known/oauth-protected-resource/mcp",
            ) => Ok(reply(
                StatusCode::OK,
                json!({"resource": format!("{}/mcp", self.base), "authorization_servers": [self.base]}),
            )),
            ("GET", "/.well-known/oauth-authorization-server") => Ok(reply(
                StatusCode::OK,
                json!({
                    "issuer": self.base,
                    "authorization_endpoint": format!("{}/authorize", self.base),
                    "token_endpoint": format!("{}/token", self.base),
                    "registration_endpoint": format!("{}/register", self.base),
                    "response_types_supported": ["code"],
                    "grant_types_supported": ["authorization_code", "refresh_token"],
                    "code_challenge_methods_supported": ["S256"],
                    "token_endpoint_auth_methods_supported": ["none"],
                }),
            )),
            ("POST", "/register") => Ok(self.register(&body(request).await)),
            ("GET", "/authorize") => Ok(self.authorize(&params(&query))),
            ("POST", "/token") => {
                if let Some(gate) = std::env::var_os("MCP_TEST_TOKEN_GATE") {
                    // Blocks until the test opens the writing end.
                    let opened = tokio::task::spawn_blocking(move || std::fs::File::open(gate)).await;
                    if !matches!(opened, Ok(Ok(_))) {
                        return Ok(reply(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            json!({"error": "token gate"}),
                        ));
                    }
                }
                let form = String::from_utf8_lossy(&body(request).await).into_owned();
                Ok(self.token(&params(&form)))
            }
            (_, "/mcp") if self.authorized(&request) => Err(request),
            (_, "/mcp") => {
                let mut response = reply(StatusCode::UNAUTHORIZED, json!({"error": "invalid_token"}));
                let challenge = format!(
                    "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
                    self.base
                );
                if let Ok(value) = hyper::header::HeaderValue::from_str(&challenge) {
                    response
                        .headers_mut()
                        .insert(hyper::header::WWW_AUTHENTICATE, value);
                }
                Ok(response)
            }
            _ => Ok(reply(StatusCode::NOT_FOUND, json!({"error": "not_found"}))),
        }
    }

    fn authorized(&self, request: &Request<Incoming>) -> bool {
        request
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|token| self.issued().access_tokens.contains(token))
    }

    fn register(&self, body: &[u8]) -> Reply {
        let Ok(request) = serde_json::from_slice::<Value>(body) else {
            return oauth_error("invalid_client_metadata");
        };
        let redirect_uris: Vec<String> = request["redirect_uris"]
            .as_array()
            .map(|uris| {
                uris.iter()
                    .filter_map(|u| u.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let mut issued = self.issued();
        issued.counter += 1;
        let client_id = format!("client-{}", issued.counter);
        issued.clients.insert(client_id.clone(), redirect_uris.clone());
        reply(
            StatusCode::CREATED,
            json!({"client_id": client_id, "redirect_uris": redirect_uris,
                "client_name": request["client_name"], "token_endpoint_auth_method": "none"}),
        )
    }

    fn authorize(&self, query: &HashMap<String, String>) -> Reply {
        let get = |key: &str| query.get(key).cloned().unwrap_or_default();
        let (client_id, redirect_uri) = (get("client_id"), get("redirect_uri"));
        let mut issued = self.issued();
        let known = issued
            .clients
            .get(&client_id)
            .is_some_and(|uris| uris.contains(&redirect_uri));
        if !known || get("response_type") != "code" || get("code_challenge_method") != "S256" {
            return oauth_error("invalid_request");
        }
        issued.counter += 1;
        let code = format!("code-{}", issued.counter);
        issued.codes.insert(
            code.clone(),
            Grant {
                client_id,
                redirect_uri: redirect_uri.clone(),
                challenge: get("code_challenge"),
            },
        );
        let location = format!(
            "{redirect_uri}?{}",
            form_urlencoded::Serializer::new(String::new())
                .append_pair("code", &code)
                .append_pair("state", &get("state"))
                .finish()
        );
        let mut response = reply(StatusCode::FOUND, json!({}));
        if let Ok(value) = hyper::header::HeaderValue::from_str(&location) {
            response.headers_mut().insert(hyper::header::LOCATION, value);
        }
        response
    }

    fn token(&self, form: &HashMap<String, String>) -> Reply {
        let get = |key: &str| form.get(key).cloned().unwrap_or_default();
        let mut issued = self.issued();
        match get("grant_type").as_str() {
            "authorization_code" => {
                let Some(grant) = issued.codes.remove(&get("code")) else {
                    return oauth_error("invalid_grant");
                };
                let verifier = get("code_verifier");
                let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .encode(sha2::Sha256::digest(verifier.as_bytes()));
                if grant.client_id != get("client_id")
                    || grant.redirect_uri != get("redirect_uri")
                    || challenge != grant.challenge
                {
                    return oauth_error("invalid_grant");
                }
            }
            "refresh_token" => {
                if self.reject_refresh || !get("refresh_token").starts_with("refresh-") {
                    return oauth_error("invalid_grant");
                }
            }
            _ => return oauth_error("unsupported_grant_type"),
        }
        issued.counter += 1;
        let n = issued.counter;
        issued.access_tokens.insert(format!("access-{n}"));
        reply(
            StatusCode::OK,
            json!({"access_token": format!("access-{n}"), "token_type": "Bearer",
                "expires_in": self.expires_in, "refresh_token": format!("refresh-{n}")}),
        )
    }
}

async fn body(request: Request<Incoming>) -> Bytes {
    match request.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    }
}
