//! Errors as data (issue 18): a client that sets `capabilities.error_data` gets, in every error
//! response, the reference's code and message with `error.data.kind` and what it needs to act on
//! the error. Each error path of the server, once, with its `data`; then that a client that did not
//! ask keeps the reference's `data: null`. (The cassette kinds are in `cassettes.rs`, `/btw`'s in
//! `btw.rs`.)

use anyhow::{Context as _, Result};
use pretty_assertions::assert_eq;
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::common::{
    TestHome, WireProcess, init_with_error_data, rpc_error, rpc_error_data, shell_call_line,
};

/// A server for `home`, initialized by a client that asks for errors as data.
async fn spawn_with_data(home: &TestHome) -> Result<WireProcess> {
    let mut wire = WireProcess::spawn(home).await?;
    wire.initialize(init_with_error_data()).await?;
    Ok(wire)
}

#[tokio::test]
async fn protocol_errors_name_their_kind() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: ok"])?;
    let mut wire = spawn_with_data(&home).await?;

    wire.send_raw("{not-json}").await?;
    wire.expect_error_data(
        None,
        -32700,
        "Invalid JSON format",
        json!({"kind": "invalid_json"}),
    )
    .await?;
    wire.send_raw(r#"{"jsonrpc":"2.1","id":"bad"}"#).await?;
    wire.expect_error_data(
        None,
        -32600,
        "Invalid request",
        json!({"kind": "invalid_request"}),
    )
    .await?;
    wire.send(&json!({"jsonrpc": "2.0", "id": "m", "method": "nope", "params": {}}))
        .await?;
    wire.expect_error_data(
        Some("m"),
        -32601,
        "Unexpected method received: nope",
        json!({"kind": "method_not_found", "method": "nope"}),
    )
    .await?;
    wire.assert_alive_with_data().await
}

#[tokio::test]
async fn invalid_params_name_the_path_of_the_first_bad_field() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: ok"])?;
    let mut wire = spawn_with_data(&home).await?;
    let cases = [
        (json!({}), "$.user_input"),
        (json!([1]), "$[0]"),
        (json!({"user_input": 5}), "$.user_input"),
        (
            json!({"user_input": [{"type": "text", "text": "a"}, {"type": "bogus"}]}),
            "$.user_input[1].type",
        ),
    ];
    let cases = cases
        .into_iter()
        .map(|(params, path)| ("prompt", params, path))
        .chain([
            ("set_plan_mode", json!({"enabled": "yes"}), "$.enabled"),
            (
                "initialize",
                json!({"protocol_version": "1.10", "client": {"name": 5}}),
                "$.client.name",
            ),
        ]);
    for (n, (method, params, path)) in cases.enumerate() {
        let id = format!("p{n}");
        wire.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        let answer = wire.next().await?;
        assert_eq!(answer["id"], json!(id), "{answer}");
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert_eq!(
            answer["error"]["message"],
            format!("Invalid parameters for method `{method}`")
        );
        let data = &answer["error"]["data"];
        assert_eq!(data["kind"], "invalid_params", "{answer}");
        assert_eq!(data["method"], method, "{answer}");
        assert_eq!(data["path"], path, "{answer}");
        assert!(data["reason"].as_str().is_some_and(|r| !r.is_empty()), "{answer}");
    }
    wire.assert_alive_with_data().await
}

#[tokio::test]
async fn an_oversized_line_keeps_its_fields_and_gains_its_kind() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: ok"])?;
    let mut wire =
        WireProcess::spawn_with_env(&home, home.args(), &[("KIMI_AGENT_MAX_LINE_BYTES", "1024")]).await?;
    wire.initialize(init_with_error_data()).await?;
    let huge = json!({"jsonrpc": "2.0", "id": "huge", "method": "prompt", "params": {"user_input": "x".repeat(4096)}});
    wire.send(&huge).await?;
    let error = wire.next().await?;
    assert_eq!(error["error"]["code"], -32700, "{error}");
    let data = &error["error"]["data"];
    assert_eq!(data["kind"], "line_too_long", "{error}");
    assert_eq!(data["reason"], "line too long", "{error}");
    assert_eq!(data["limit"], 1024, "{error}");
    assert!(data["length"].as_u64().is_some_and(|n| n > 4096), "{error}");
    wire.assert_alive_with_data().await
}

#[tokio::test]
async fn turn_state_errors_name_their_kind() -> Result<()> {
    let home = TestHome::new()?.scripted(&[&shell_call_line("c1", "echo hi"), "text: done"])?;
    let mut wire = spawn_with_data(&home).await?;
    let steer = wire.request("steer", json!({"user_input": "faster"})).await?;
    wire.expect_error_data(
        Some(&steer),
        -32000,
        "No agent turn is in progress",
        json!({"kind": "no_turn"}),
    )
    .await?;
    // A turn waits for an approval: a second prompt is refused.
    let prompt = wire.start_prompt(json!("run it")).await?;
    wire.peek_request("ApprovalRequest").await?;
    let busy = wire.request("prompt", json!({"user_input": "meanwhile"})).await?;
    assert_eq!(
        wire.response_to(&busy).await?,
        rpc_error_data(
            Some(&busy),
            -32000,
            "An agent turn is already in progress",
            json!({"kind": "turn_in_progress"})
        )
    );
    // `replay` and `initialize` are refused during a turn too.
    let replay = wire.request("replay", json!({})).await?;
    assert_eq!(
        wire.response_to(&replay).await?,
        rpc_error_data(
            Some(&replay),
            -32000,
            "An agent turn is already in progress",
            json!({"kind": "turn_in_progress"})
        )
    );
    let again = wire.request("initialize", init_with_error_data()).await?;
    assert_eq!(
        wire.response_to(&again).await?,
        rpc_error_data(
            Some(&again),
            -32000,
            "An agent turn is already in progress",
            json!({"kind": "turn_in_progress"})
        )
    );
    // A `steer` whose input is not a user input: the path of the bad field.
    let bad = wire.request("steer", json!({"user_input": 42})).await?;
    let answer = wire.response_to(&bad).await?;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(
        answer["error"]["message"],
        "Invalid parameters for method `steer`"
    );
    let data = &answer["error"]["data"];
    assert_eq!(
        (&data["kind"], &data["method"], &data["path"]),
        (&json!("invalid_params"), &json!("steer"), &json!("$.user_input")),
        "{answer}"
    );
    let cancel = wire.request("cancel", json!({})).await?;
    assert_eq!(wire.response_to(&cancel).await?["result"], json!({}));
    let (answer, _) = wire.read_response(&prompt).await?;
    assert_eq!(answer["result"]["status"], "cancelled", "{answer}");
    wire.assert_alive_with_data().await
}

#[tokio::test]
async fn model_errors_name_their_kind_and_what_to_do() -> Result<()> {
    // No model configured.
    let home = TestHome::new()?.with_config(&json!({}))?;
    let mut wire = spawn_with_data(&home).await?;
    let (answer, _) = wire.prompt(json!("hi")).await?;
    assert_eq!(
        answer["error"],
        json!({"code": -32001, "message": "LLM is not set", "data": {"kind": "llm_not_set"}})
    );

    // A capability the model lacks.
    let home = TestHome::new()?.scripted(&["text: ok"])?;
    let mut wire = spawn_with_data(&home).await?;
    let input = json!([{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}}]);
    let (answer, _) = wire.prompt(input).await?;
    assert_eq!(
        answer["error"],
        json!({
            "code": -32002,
            "message": "LLM model 'scripted_echo' does not support required capability: image_in.",
            "data": {"kind": "llm_not_supported", "model": "scripted_echo", "capabilities": ["image_in"]},
        })
    );

    // The provider refuses for good: not retryable, with its status.
    let home = TestHome::new()?.scripted(&["error: 401 Invalid API key"])?;
    let mut wire = spawn_with_data(&home).await?;
    let (answer, _) = wire.prompt(json!("hi")).await?;
    assert_eq!(
        answer["error"],
        json!({
            "code": -32003,
            "message": "Invalid API key",
            "data": {"kind": "provider_error", "provider": "_scripted_echo", "error_type": "APIStatusError",
                     "status_code": 401, "retryable": false},
        })
    );

    // The provider is busy, past the retries: retryable (later).
    let home = TestHome::new()?
        .scripted(&["error: 503 busy", "error: 503 busy"])?
        .arg("--max-retries-per-step")
        .arg("2");
    let mut wire = spawn_with_data(&home).await?;
    let (answer, _) = wire.prompt(json!("hi")).await?;
    assert_eq!(answer["error"]["code"], -32003, "{answer}");
    assert_eq!(
        answer["error"]["data"],
        json!({"kind": "provider_error", "provider": "_scripted_echo", "error_type": "APIStatusError",
               "status_code": 503, "retryable": true})
    );
    wire.assert_alive_with_data().await
}

#[tokio::test]
async fn a_client_that_did_not_ask_keeps_the_references_null_data() -> Result<()> {
    let home = TestHome::new()?.scripted(&["error: 401 Invalid API key"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    // Before any initialize, and after one without the capability: `data` stays null.
    wire.send_raw("{not-json}").await?;
    wire.expect_error(None, -32700, "Invalid JSON format").await?;
    wire.initialize(json!({"protocol_version": "1.10", "capabilities": {"error_data": false}}))
        .await?;
    let id = wire.start_prompt(json!("hi")).await?;
    let (answer, _) = wire.read_response(&id).await?;
    assert_eq!(answer, rpc_error(Some(&id), -32003, "Invalid API key"));
    wire.send(&json!({"jsonrpc": "2.0", "id": "p", "method": "prompt", "params": {}}))
        .await?;
    assert_eq!(
        wire.next().await?,
        rpc_error(Some("p"), -32602, "Invalid parameters for method `prompt`")
    );
    wire.assert_alive().await
}

/// A server on session `id` of `home`, initialized by a client that asks for errors as data.
async fn spawn_on_session(home: &TestHome, id: &str) -> Result<WireProcess> {
    let mut args = home.args();
    args.extend(["--session".to_owned(), id.to_owned()]);
    let mut wire = WireProcess::spawn_with(home, args).await?;
    wire.initialize(init_with_error_data()).await?;
    Ok(wire)
}

#[tokio::test]
async fn session_errors_name_their_kind() -> Result<()> {
    // Held by another process: the fields that predate `kind` stay, `kind` joins them.
    let home = TestHome::new()?.scripted(&["text: one"])?;
    let holder = spawn_on_session(&home, "held").await?;
    let pid = holder.child.id().context("the holder has no pid")?;
    let mut second = spawn_on_session(&home, "held").await?;
    let (answer, _) = second.prompt(json!("two")).await?;
    assert_eq!(
        answer["error"],
        json!({
            "code": -32000,
            "message": format!("Session held is in use by another kimi-agent process (pid {pid})"),
            "data": {"kind": "session_in_use", "session_id": "held", "pid": pid},
        })
    );
    second.assert_alive_with_data().await?;
    drop(holder);

    // A session file that cannot be written (a directory where context.jsonl belongs).
    let home = TestHome::new()?.scripted(&["text: hello"])?;
    let dir = home.sessions_of_work_dir().join("broken");
    std::fs::create_dir_all(dir.join("context.jsonl"))?;
    let mut wire = spawn_on_session(&home, "broken").await?;
    let (answer, _) = wire.prompt(json!("hi")).await?;
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("SessionFileError: cannot write "), "{answer}");
    assert_eq!(answer["error"]["data"], json!({"kind": "session_file_error"}));
    wire.assert_alive_with_data().await
}

#[tokio::test]
async fn a_replay_that_cannot_read_the_session_names_its_kind() -> Result<()> {
    // A directory where wire.jsonl belongs: opening succeeds, reading fails.
    let home = TestHome::new()?.scripted(&["text: unused"])?;
    let dir = home.sessions_of_work_dir().join("unreadable");
    std::fs::create_dir_all(dir.join("wire.jsonl"))?;
    let mut wire = spawn_on_session(&home, "unreadable").await?;
    let id = wire.request("replay", json!({})).await?;
    let (answer, _) = wire.read_response(&id).await?;
    assert_eq!(
        answer["error"],
        json!({"code": -32603, "message": "Replay failed", "data": {"kind": "replay_failed"}})
    );
    wire.assert_alive_with_data().await
}

#[tokio::test]
async fn a_provider_that_fails_without_a_status_is_not_retryable() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: only one"])?;
    let mut wire = spawn_with_data(&home).await?;
    wire.prompt(json!("first")).await?;
    let (answer, _) = wire.prompt(json!("second")).await?;
    assert_eq!(
        answer["error"],
        json!({
            "code": -32003,
            "message": "ScriptedEchoChatProvider exhausted at turn 2.",
            "data": {"kind": "provider_error", "provider": "_scripted_echo", "error_type": "ChatProviderError",
                     "status_code": null, "retryable": false},
        })
    );
    wire.assert_alive_with_data().await
}

/// A Kimi account's login (as `kimi-agent login` leaves it) whose chat and refresh both answer 401.
#[tokio::test]
async fn an_expired_login_names_its_kind() -> Result<()> {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({"error": {
            "message": "Invalid Authentication", "type": "invalid_authentication_error"
        }})))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/oauth/token"))
        .respond_with(ResponseTemplate::new(401).set_body_json(
            json!({"error": "invalid_grant", "error_description": "The refresh token was revoked."}),
        ))
        .mount(&server)
        .await;
    let base_url = format!("{}/v1", server.uri());
    let home = TestHome::new()?.with_config(&json!({
        "default_model": "k",
        "models": {"k": {"provider": "account", "model": "kimi-for-coding", "max_context_size": 100_000}},
        "providers": {"account": {"type": "kimi", "base_url": base_url, "api_key": "",
                                  "oauth": {"storage": "file", "key": "oauth/kimi-code"}}},
    }))?;
    let credentials = home.share().join("credentials");
    std::fs::create_dir_all(&credentials)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs_f64();
    let token = credentials.join("kimi-code.json");
    std::fs::write(
        &token,
        json!({"access_token": "revoked", "refresh_token": "revoked-too", "expires_at": now + 3600.0,
               "scope": "kimi-code", "token_type": "Bearer", "expires_in": 3600.0})
        .to_string(),
    )?;
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    let env = [
        ("KIMI_CODE_OAUTH_HOST", server.uri()),
        ("KIMI_CODE_BASE_URL", base_url.clone()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut wire = WireProcess::spawn_with_env(&home, home.args(), &env).await?;
    wire.initialize(init_with_error_data()).await?;
    let (answer, _) = wire.prompt(json!("hi")).await?;
    assert_eq!(
        answer["error"],
        json!({
            "code": -32004,
            "message": "Authentication failed. Your login session may have expired. Please run \"/login\" to sign in again.",
            "data": {"kind": "auth_expired"},
        })
    );
    wire.assert_alive_with_data().await
}

/// A session no process can lock (a directory where its lock file belongs) is served read-only; a
/// method that would write it is refused as an internal error, the reason in the message.
#[tokio::test]
async fn a_session_that_cannot_be_locked_refuses_writes_as_an_internal_error() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hello"])?;
    let mut wire = spawn_on_session(&home, "unlockable").await?;
    wire.prompt(json!("hi")).await?;
    assert!(wire.wait_exit().await?.success());
    let dir = home.sessions_of_work_dir().join("unlockable");
    std::fs::create_dir(dir.join("kimi-agent.lock"))?;
    let mut wire = spawn_on_session(&home, "unlockable").await?;
    let (answer, _) = wire.prompt(json!("no")).await?;
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("cannot lock the session"), "{answer}");
    assert_eq!(answer["error"]["data"], json!({"kind": "internal_error"}));
    wire.assert_alive_with_data().await
}
