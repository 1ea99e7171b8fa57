//! `login` and `logout` against a local mock of the Kimi account server's device flow (issue 12), and
//! sessions that use the account: the stored token is sent, refreshed before it expires and after a
//! 401, and a login that cannot be refreshed is reported as the reference's -32004.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, Result, anyhow};
use kimi_core::{Capability, ConfigSource, ProviderType};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::common::mock_model::{Reply, sse};
use crate::common::{READ_TIMEOUT, TestHome, WireProcess};

const USER_CODE: &str = "WXYZ-1234";
/// The user code of a device code that expires before anyone approves it.
const EXPIRED_USER_CODE: &str = "ABCD-0000";
/// What the mock hands out at login, and on refresh.
const FIRST_TOKEN: &str = "access-one";
const REFRESHED_TOKEN: &str = "access-two";

/// The account server and the coding API (`/v1`) in one mock.
struct Account {
    server: MockServer,
}

/// How the mock's device flow goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flow {
    /// The first poll finds the user still away; the second, approved.
    Approved,
    /// The first device code expires before anyone approves it; the next code is approved at once.
    FirstCodeExpires,
}

/// The answer to a device authorization handing out `device_code` and `user_code`.
fn device_authorization(server: &MockServer, device_code: &str, user_code: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "user_code": user_code,
        "device_code": device_code,
        "verification_uri": format!("{}/device", server.uri()),
        "verification_uri_complete": format!("{}/device?user_code={user_code}", server.uri()),
        "expires_in": 600,
        "interval": 1,
    }))
}

/// The account's models as `/v1/models` lists them.
fn account_models() -> Value {
    json!([
        {"id": "kimi-for-coding", "context_length": 262_144, "supports_reasoning": true,
         "supports_image_in": true, "supports_video_in": false, "display_name": "Kimi for Coding"},
        {"id": "plain-model", "context_length": 131_072},
    ])
}

impl Account {
    async fn start() -> Self {
        Self::serve(Flow::Approved, account_models()).await
    }

    /// A mock whose device flow goes as `flow` and whose `/v1/models` lists `models`.
    async fn serve(flow: Flow, models: Value) -> Self {
        let server = MockServer::start().await;
        let client_id = || body_string_contains("client_id=17e5f671-d194-4dfb-9706-5516cb48c098");
        let device_grant = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code";
        match flow {
            Flow::Approved => {
                Mock::given(method("POST"))
                    .and(path("/api/oauth/token"))
                    .and(body_string_contains(device_grant))
                    .respond_with(ResponseTemplate::new(400).set_body_json(
                        json!({"error": "authorization_pending", "error_description": "The user has not approved yet."}),
                    ))
                    .up_to_n_times(1)
                    .with_priority(1)
                    .mount(&server)
                    .await;
            }
            Flow::FirstCodeExpires => {
                Mock::given(method("POST"))
                    .and(path("/api/oauth/device_authorization"))
                    .and(client_id())
                    .respond_with(device_authorization(&server, "device-0", EXPIRED_USER_CODE))
                    .up_to_n_times(1)
                    .with_priority(1)
                    .mount(&server)
                    .await;
                Mock::given(method("POST"))
                    .and(path("/api/oauth/token"))
                    .and(body_string_contains(device_grant))
                    .and(body_string_contains("device_code=device-0"))
                    .respond_with(ResponseTemplate::new(400).set_body_json(
                        json!({"error": "expired_token", "error_description": "The device code has expired."}),
                    ))
                    .with_priority(1)
                    .mount(&server)
                    .await;
            }
        }
        Mock::given(method("POST"))
            .and(path("/api/oauth/device_authorization"))
            .and(client_id())
            .respond_with(device_authorization(&server, "device-1", USER_CODE))
            .with_priority(2)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/api/oauth/token"))
            .and(body_string_contains(device_grant))
            .and(body_string_contains("device_code=device-1"))
            .respond_with(ResponseTemplate::new(200).set_body_json(token_body(FIRST_TOKEN, "refresh-one")))
            .with_priority(2)
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path("/v1/models"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({ "data": models })))
            .mount(&server)
            .await;
        Self { server }
    }

    /// The variables that point `login` and sessions at this mock.
    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("KIMI_CODE_OAUTH_HOST".into(), self.server.uri()),
            ("KIMI_CODE_BASE_URL".into(), format!("{}/v1", self.server.uri())),
        ]
    }

    /// Refreshing `refresh_token` answers `status` (200 with [`REFRESHED_TOKEN`]).
    async fn refresh_answers(&self, refresh_token: &str, status: u16) {
        let body = if status == 200 {
            token_body(REFRESHED_TOKEN, "refresh-two")
        } else {
            json!({"error": "invalid_grant", "error_description": "The refresh token was revoked."})
        };
        Mock::given(method("POST"))
            .and(path("/api/oauth/token"))
            .and(body_string_contains("grant_type=refresh_token"))
            .and(body_string_contains(format!("refresh_token={refresh_token}")))
            .respond_with(ResponseTemplate::new(status).set_body_json(body))
            .mount(&self.server)
            .await;
    }

    /// Chat completions that accept only `Bearer <accepted>` (401 otherwise) and say `hello`.
    async fn chat_accepting(&self, accepted: &str) {
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(BearerOnly(Arc::new(Mutex::new(accepted.to_owned()))))
            .mount(&self.server)
            .await;
    }

    /// The bearer tokens of the chat requests received, in order.
    async fn chat_bearers(&self) -> Vec<String> {
        self.received("/v1/chat/completions")
            .await
            .iter()
            .map(|r| bearer(r).unwrap_or_default())
            .collect()
    }

    async fn received(&self, at: &str) -> Vec<Request> {
        let all = self.server.received_requests().await.unwrap_or_default();
        all.into_iter().filter(|r| r.url.path() == at).collect()
    }
}

fn bearer(request: &Request) -> Option<String> {
    let value = request.headers.get("authorization")?.to_str().ok()?;
    value.strip_prefix("Bearer ").map(str::to_owned)
}

struct BearerOnly(Arc<Mutex<String>>);

impl Respond for BearerOnly {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let accepted = self.0.lock().map(|a| a.clone()).unwrap_or_default();
        if bearer(request).as_deref() != Some(accepted.as_str()) {
            return ResponseTemplate::new(401)
                .set_body_json(json!({"error": {"message": "Invalid Authentication", "type": "invalid_authentication_error"}}));
        }
        ResponseTemplate::new(200)
            .insert_header("content-type", "text/event-stream")
            .set_body_string(sse(&Reply::Text("hello".into())))
    }
}

fn token_body(access: &str, refresh: &str) -> Value {
    json!({"access_token": access, "refresh_token": refresh, "expires_in": 3600,
           "scope": "kimi-code", "token_type": "Bearer"})
}

/// A `$BROWSER` that records the page it was asked to open.
fn recording_browser(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("browser.sh");
    let record = dir.join("opened.txt");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nprintf '%s\\n' \"$1\" > '{}'\n", record.display()),
    )?;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    Ok((script, record))
}

/// Runs the binary with `args` and extra environment, stdin closed.
async fn run(home: &TestHome, args: &[&str], env: &[(String, String)]) -> Result<Output> {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let child = home
        .command(&args)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    tokio::time::timeout(READ_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| anyhow!("{args:?} did not exit"))?
        .context("waiting")
}

fn json_lines(output: &Output) -> Result<Vec<Value>> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).with_context(|| format!("not JSON: {line}")))
        .collect()
}

fn credentials(home: &TestHome) -> PathBuf {
    home.share().join("credentials/kimi-code.json")
}

fn stored_access_token(home: &TestHome) -> Result<String> {
    let stored: Value = serde_json::from_slice(&std::fs::read(credentials(home))?)?;
    Ok(stored["access_token"].as_str().unwrap_or_default().to_owned())
}

/// Logs in through the mock; returns the events printed.
async fn login(home: &TestHome, account: &Account, extra_env: &[(String, String)]) -> Result<Vec<Value>> {
    let mut env = account.env();
    env.extend_from_slice(extra_env);
    let output = run(home, &["login", "--json"], &env).await?;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    json_lines(&output)
}

#[tokio::test]
async fn login_runs_the_device_flow_and_writes_the_accounts_models() -> Result<()> {
    let account = Account::start().await;
    let home = TestHome::new()?;
    let (browser, opened) = recording_browser(home.root.path())?;
    let events = login(
        &home,
        &account,
        &[("BROWSER".into(), browser.display().to_string())],
    )
    .await?;

    let page = format!("{}/device?user_code={USER_CODE}", account.server.uri());
    assert_eq!(
        events,
        vec![
            json!({"type": "info", "message": "Please visit the following URL to finish authorization."}),
            json!({"type": "verification_url", "message": format!("Verification URL: {page}"),
                   "data": {"verification_url": page, "user_code": USER_CODE}}),
            json!({"type": "waiting", "message": "Waiting for user authorization...: The user has not approved yet.",
                   "data": {"error": "authorization_pending", "error_description": "The user has not approved yet."}}),
            json!({"type": "success", "message": "Logged in successfully."}),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(&opened)?.trim(),
        page,
        "the verification page is opened"
    );

    // The tokens, private, in the reference's format.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(credentials(&home))?.permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let stored: Value = serde_json::from_slice(&std::fs::read(credentials(&home))?)?;
    assert_eq!(
        (
            &stored["access_token"],
            &stored["refresh_token"],
            &stored["expires_in"]
        ),
        (&json!(FIRST_TOKEN), &json!("refresh-one"), &json!(3600.0))
    );
    let models_request = &account.received("/v1/models").await[0];
    assert_eq!(bearer(models_request).as_deref(), Some(FIRST_TOKEN));
    let polls = account.received("/api/oauth/token").await;
    assert_eq!(polls.len(), 2, "one pending poll, one approved");
    assert_eq!(polls[0].headers["x-msh-platform"], "kimi_cli");

    // The configuration, as the reference writes it.
    let config = kimi_core::load_config_in(&ConfigSource::Default, &home.share())?;
    let base = format!("{}/v1", account.server.uri());
    let provider = &config.providers["managed:kimi-code"];
    assert_eq!(
        (provider.kind, provider.base_url.as_str()),
        (ProviderType::Kimi, base.as_str())
    );
    assert!(provider.api_key.is_empty());
    assert_eq!(
        provider.oauth.as_ref().map(|o| o.key.as_str()),
        Some("oauth/kimi-code")
    );
    assert_eq!(config.default_model, "kimi-code/kimi-for-coding");
    assert!(config.default_thinking);
    let coding = &config.models["kimi-code/kimi-for-coding"];
    assert_eq!(coding.max_context_size, 262_144);
    assert_eq!(coding.display_name.as_deref(), Some("Kimi for Coding"));
    assert_eq!(
        coding
            .capabilities
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect::<Vec<_>>(),
        [Capability::ImageIn, Capability::Thinking]
    );
    assert_eq!(config.models["kimi-code/plain-model"].capabilities, None);
    let search = config.services.moonshot_search.clone().context("search")?;
    assert_eq!(search.base_url, format!("{base}/search"));
    assert!(search.oauth.is_some());
    Ok(())
}

#[tokio::test]
async fn logout_removes_exactly_what_login_wrote() -> Result<()> {
    let account = Account::start().await;
    let home = TestHome::new()?;
    // A configuration of the user's own, which must survive the round trip.
    let own = "default_model = \"own\"\n\n[models.own]\nprovider = \"mine\"\nmodel = \"m\"\nmax_context_size = 1000\n\n\
               [providers.mine]\ntype = \"openai_legacy\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key = \"sk-own\"\n";
    std::fs::write(home.share().join("config.toml"), own)?;
    let before = kimi_core::load_config_in(&ConfigSource::Default, &home.share())?;
    login(&home, &account, &[]).await?;
    assert_eq!(
        kimi_core::load_config_in(&ConfigSource::Default, &home.share())?.default_model,
        "kimi-code/kimi-for-coding"
    );

    let output = run(&home, &["logout"], &[]).await?;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "Logged out successfully.\n"
    );
    assert!(!credentials(&home).exists());
    let mut after = kimi_core::load_config_in(&ConfigSource::Default, &home.share())?;
    // Reference: the default model was the account's, so it is cleared, not restored.
    assert_eq!(after.default_model, "");
    after.default_model = before.default_model.clone();
    after.default_thinking = before.default_thinking;
    assert_eq!(after, before);

    let again = run(&home, &["logout", "--json"], &[]).await?;
    assert_eq!(again.status.code(), Some(0), "logging out twice is fine");
    assert_eq!(
        json_lines(&again)?,
        vec![json!({"type": "success", "message": "Logged out successfully."})]
    );
    Ok(())
}

#[tokio::test]
async fn a_failing_account_server_is_reported_and_exits_1() -> Result<()> {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/oauth/device_authorization"))
        .respond_with(ResponseTemplate::new(503).set_body_json(json!({"error": "unavailable"})))
        .mount(&server)
        .await;
    let home = TestHome::new()?;
    let env = [("KIMI_CODE_OAUTH_HOST".to_owned(), server.uri())];
    let output = run(&home, &["login", "--json"], &env).await?;
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        json_lines(&output)?,
        vec![
            json!({"type": "error", "message": "Login failed: Device authorization failed: {\"error\":\"unavailable\"}"})
        ]
    );
    let plain = run(&home, &["login"], &env).await?;
    assert_eq!(plain.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&plain.stdout),
        "Login failed: Device authorization failed: {\"error\":\"unavailable\"}\n"
    );
    assert!(!credentials(&home).exists());
    Ok(())
}

// A device code that expires starts the flow over with a new one, as the reference does.
#[tokio::test]
async fn an_expired_device_code_restarts_the_login() -> Result<()> {
    let account = Account::serve(Flow::FirstCodeExpires, account_models()).await;
    let home = TestHome::new()?;
    let events = login(&home, &account, &[]).await?;
    let page = |code: &str| format!("{}/device?user_code={code}", account.server.uri());
    let visit = json!({"type": "info", "message": "Please visit the following URL to finish authorization."});
    let url = |code: &str| {
        json!({"type": "verification_url", "message": format!("Verification URL: {}", page(code)),
               "data": {"verification_url": page(code), "user_code": code}})
    };
    assert_eq!(
        events,
        vec![
            visit.clone(),
            url(EXPIRED_USER_CODE),
            json!({"type": "info", "message": "Device code expired, restarting login..."}),
            visit,
            url(USER_CODE),
            json!({"type": "success", "message": "Logged in successfully."}),
        ]
    );
    assert_eq!(account.received("/api/oauth/device_authorization").await.len(), 2);
    assert_eq!(stored_access_token(&home)?, FIRST_TOKEN);
    Ok(())
}

// An account with no models is an error, and the configuration is left as it was.
#[tokio::test]
async fn an_account_without_models_is_an_error_and_changes_no_configuration() -> Result<()> {
    let account = Account::serve(Flow::Approved, json!([])).await;
    let home = TestHome::new()?;
    let own = "default_model = \"\"\n";
    std::fs::write(home.share().join("config.toml"), own)?;
    let output = run(&home, &["login", "--json"], &account.env()).await?;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let events = json_lines(&output)?;
    assert_eq!(
        events.last(),
        Some(&json!({"type": "error", "message": "No models available for the selected platform."}))
    );
    assert_eq!(std::fs::read_to_string(home.share().join("config.toml"))?, own);
    Ok(())
}

/// A signed-in session: prompts `hi` and returns the prompt's answer.
async fn prompt_signed_in(home: &TestHome, account: &Account) -> Result<Value> {
    let env = account.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut wire = WireProcess::spawn_with_env(home, home.args(), &env).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (response, _) = wire.prompt(json!("hi")).await?;
    Ok(response)
}

/// Rewrites the stored token's expiry to `seconds` from now.
fn expire_in(home: &TestHome, seconds: f64) -> Result<()> {
    let path = credentials(home);
    let mut stored: Value = serde_json::from_slice(&std::fs::read(&path)?)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs_f64();
    stored["expires_at"] = json!(now + seconds);
    std::fs::write(&path, stored.to_string())?;
    Ok(())
}

#[tokio::test]
async fn a_session_sends_the_accounts_token_and_refreshes_it_before_it_expires() -> Result<()> {
    let account = Account::start().await;
    let home = TestHome::new()?;
    login(&home, &account, &[]).await?;
    account.chat_accepting(FIRST_TOKEN).await;
    assert_eq!(
        prompt_signed_in(&home, &account).await?["result"],
        json!({"status": "finished"})
    );
    assert_eq!(account.chat_bearers().await, [FIRST_TOKEN]);

    // A minute left of an hour: refreshed before the call, and the new tokens are stored.
    expire_in(&home, 60.0)?;
    account.server.reset().await;
    account.refresh_answers("refresh-one", 200).await;
    account.chat_accepting(REFRESHED_TOKEN).await;
    assert_eq!(
        prompt_signed_in(&home, &account).await?["result"],
        json!({"status": "finished"})
    );
    assert_eq!(account.chat_bearers().await, [REFRESHED_TOKEN]);
    assert_eq!(stored_access_token(&home)?, REFRESHED_TOKEN);
    Ok(())
}

#[tokio::test]
async fn a_401_refreshes_the_token_and_retries_once() -> Result<()> {
    let account = Account::start().await;
    let home = TestHome::new()?;
    login(&home, &account, &[]).await?;
    // The server no longer takes the first token although it has not expired yet.
    account.refresh_answers("refresh-one", 200).await;
    account.chat_accepting(REFRESHED_TOKEN).await;
    assert_eq!(
        prompt_signed_in(&home, &account).await?["result"],
        json!({"status": "finished"})
    );
    assert_eq!(account.chat_bearers().await, [FIRST_TOKEN, REFRESHED_TOKEN]);
    assert_eq!(stored_access_token(&home)?, REFRESHED_TOKEN);
    Ok(())
}

#[tokio::test]
async fn a_login_that_cannot_be_refreshed_asks_to_sign_in_again() -> Result<()> {
    let account = Account::start().await;
    let home = TestHome::new()?;
    login(&home, &account, &[]).await?;
    account.refresh_answers("refresh-one", 401).await;
    account.chat_accepting("nobody").await;
    let response = prompt_signed_in(&home, &account).await?;
    assert_eq!(
        response["error"],
        json!({"code": -32004, "data": null,
               "message": "Authentication failed. Your login session may have expired. Please run \"/login\" to sign in again."})
    );
    // The refused login stays on disk (another process may have rotated it meanwhile); `login` replaces it.
    assert_eq!(stored_access_token(&home)?, FIRST_TOKEN);
    Ok(())
}
