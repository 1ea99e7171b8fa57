//! Engine tests with real command hooks and a real wire server on an in-memory pipe, the test
//! playing the client.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kimi_wire::params::WireHookSubscription;
use kimi_wire::testing::FakeClient;
use kimi_wire::{Server, ServerConfig};
use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};

use super::*;
use crate::config::{HookDef, HookEvent, HookOnError};
use crate::events::EventSink;

fn hook(event: HookEvent, matcher: &str, command: &str) -> HookDef {
    HookDef {
        event,
        command: command.to_owned(),
        matcher: matcher.to_owned(),
        timeout: 20,
        on_error: HookOnError::Allow,
    }
}

fn subscription(id: &str, event: &str, matcher: &str, timeout: u64) -> WireHookSubscription {
    WireHookSubscription {
        id: id.to_owned(),
        event: event.to_owned(),
        matcher: matcher.to_owned(),
        timeout,
    }
}

fn engine(dir: &Path, hooks: Vec<HookDef>) -> Arc<HookEngine> {
    Arc::new(HookEngine::new(hooks, dir.to_path_buf(), "sess-1".to_owned()))
}

fn pre_tool(tool: &str) -> Map<String, Value> {
    input::pre_tool_use(tool, json!({"command": "echo hi"}), "tc-1")
}

/// How long a test waits for the server or a hook.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the engine sends its events: straight to `client`, unrecorded.
fn sink(client: &FakeClient) -> EventSink {
    EventSink::new(client.handle.clone(), None)
}

#[test]
fn event_names_round_trip_in_reference_order() {
    let names: Vec<&str> = ALL_EVENTS.iter().map(|e| event_name(*e)).collect();
    assert_eq!(names, crate::runtime::HOOK_EVENTS);
    for e in ALL_EVENTS {
        assert_eq!(parse_event(event_name(e)), Some(e));
    }
    assert_eq!(parse_event("pretooluse"), None);
    assert_eq!(parse_event("Bogus"), None);
}

#[test]
fn configured_counts_group_by_event_in_first_seen_order() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(
        dir.path(),
        vec![
            hook(HookEvent::Stop, "", "a"),
            hook(HookEvent::PreToolUse, "Shell", "b"),
            hook(HookEvent::Stop, "", "a"),
        ],
    );
    let (server, handle) = Server::new(ServerConfig::default());
    drop(server);
    engine.attach_wire(
        vec![
            subscription("s1", "PostToolUse", "ReadFile", 30),
            subscription("s2", "Stop", "", 30),
            subscription("s3", "Bogus", "", 30),
        ],
        EventSink::new(handle, None),
    );
    let expected: Vec<(String, u32)> = vec![
        ("Stop".into(), 3),
        ("PreToolUse".into(), 1),
        ("PostToolUse".into(), 1),
    ];
    assert_eq!(engine.configured_counts(), expected);
    assert!(engine.has_hooks_for(HookEvent::PostToolUse));
    assert!(!engine.has_hooks_for(HookEvent::Notification));
}

#[tokio::test]
async fn nothing_matching_allows_silently() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), vec![hook(HookEvent::PreToolUse, "^Shell$", "exit 2")]);
    let mut client = FakeClient::start();
    engine.attach_wire(vec![], sink(&client));
    assert_eq!(
        engine
            .trigger(HookEvent::PreToolUse, "ReadFile", pre_tool("ReadFile"))
            .await,
        HookDecision::Allow
    );
    assert_eq!(
        engine.trigger(HookEvent::Stop, "", input::stop(false)).await,
        HookDecision::Allow
    );
    client.assert_quiet().await;
}

#[tokio::test]
async fn a_block_is_reported_between_triggered_and_resolved() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(
        dir.path(),
        vec![
            hook(
                HookEvent::PreToolUse,
                "Shell",
                "echo 'Shell blocked by hook' >&2; exit 2",
            ),
            hook(HookEvent::PreToolUse, "", "echo fine"),
        ],
    );
    let mut client = FakeClient::start();
    engine.attach_wire(vec![], sink(&client));

    let decision = engine
        .trigger(HookEvent::PreToolUse, "Shell", pre_tool("Shell"))
        .await;
    assert_eq!(
        decision,
        HookDecision::Block {
            reason: "Shell blocked by hook".into(),
            reasons: vec!["Shell blocked by hook".into()],
        }
    );
    assert_eq!(
        client.next_event().await,
        json!({"type": "HookTriggered", "payload": {"event": "PreToolUse", "target": "Shell", "hook_count": 2}})
    );
    let mut resolved = client.next_event().await;
    assert!(resolved["payload"]["duration_ms"].is_u64(), "{resolved}");
    resolved["payload"]["duration_ms"] = json!(0);
    assert_eq!(
        resolved,
        json!({"type": "HookResolved", "payload": {
            "event": "PreToolUse", "target": "Shell", "action": "block",
            "reason": "Shell blocked by hook", "duration_ms": 0,
        }})
    );
}

#[tokio::test]
async fn without_the_wire_hooks_run_but_report_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(
        dir.path(),
        vec![hook(HookEvent::UserPromptSubmit, "", "echo no >&2; exit 2")],
    );
    let decision = engine
        .trigger(HookEvent::UserPromptSubmit, "hi", input::user_prompt_submit("hi"))
        .await;
    assert_eq!(decision.is_block(), true);
    // Detaching stops the events again.
    let mut client = FakeClient::start();
    engine.attach_wire(vec![], sink(&client));
    engine.detach_wire();
    assert!(
        engine
            .trigger(HookEvent::UserPromptSubmit, "hi", input::user_prompt_submit("hi"))
            .await
            .is_block()
    );
    client.assert_quiet().await;
}

#[tokio::test]
async fn identical_commands_run_once_per_trigger() {
    let dir = tempfile::tempdir().unwrap();
    let count = "echo x >> runs.txt";
    let engine = engine(
        dir.path(),
        vec![
            hook(HookEvent::Stop, "", count),
            hook(HookEvent::Stop, "", count),
            hook(HookEvent::Stop, "", "echo y >> other.txt"),
        ],
    );
    let mut client = FakeClient::start();
    engine.attach_wire(vec![], sink(&client));
    assert_eq!(
        engine.trigger(HookEvent::Stop, "", input::stop(false)).await,
        HookDecision::Allow
    );
    assert_eq!(client.next_event().await["payload"]["hook_count"], 2);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("runs.txt")).unwrap(),
        "x\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("other.txt")).unwrap(),
        "y\n"
    );
}

#[tokio::test]
async fn the_first_blocking_hook_gives_the_reason_and_stop_takes_the_first_non_empty() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(
        dir.path(),
        vec![
            hook(HookEvent::Stop, "", "exit 0"),
            hook(HookEvent::Stop, "", "exit 2"),
            hook(HookEvent::Stop, "", "echo 'keep going' >&2; exit 2"),
        ],
    );
    let decision = engine.trigger(HookEvent::Stop, "", input::stop(false)).await;
    assert_eq!(
        decision,
        HookDecision::Block {
            reason: String::new(),
            reasons: vec![String::new(), "keep going".into()],
        }
    );
    assert_eq!(decision.stop_continuation(), Some("keep going"));
    assert_eq!(HookDecision::Allow.stop_continuation(), None);
}

#[tokio::test]
async fn command_hooks_read_the_event_as_python_json() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(
        dir.path(),
        vec![hook(HookEvent::PreToolUse, "", "cat > input.json")],
    );
    engine
        .trigger(HookEvent::PreToolUse, "Shell", pre_tool("Shell"))
        .await;
    let text = std::fs::read_to_string(dir.path().join("input.json")).unwrap();
    let cwd = dir.path().to_string_lossy();
    assert_eq!(
        text,
        format!(
            r#"{{"hook_event_name": "PreToolUse", "session_id": "sess-1", "cwd": "{cwd}", "tool_name": "Shell", "tool_input": {{"command": "echo hi"}}, "tool_call_id": "tc-1"}}"#
        )
    );
}

#[tokio::test]
async fn a_wire_subscription_is_asked_through_a_hook_request() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), vec![]);
    let mut client = FakeClient::start();
    engine.attach_wire(
        vec![
            subscription("sub_pre", "PreToolUse", "Shell", 30),
            subscription("sub_read", "PreToolUse", "ReadFile", 30),
            subscription("sub_bad", "NotAnEvent", "", 30),
        ],
        sink(&client),
    );
    let running = tokio::spawn({
        let engine = Arc::clone(&engine);
        async move {
            engine
                .trigger(HookEvent::PreToolUse, "Shell", pre_tool("Shell"))
                .await
        }
    });

    assert_eq!(client.next_event().await["payload"]["hook_count"], 1);
    let request = client.next_message().await;
    assert_eq!(request["method"], "request");
    let id = request["id"].clone();
    let hex = id.as_str().unwrap();
    assert!(
        hex.len() == 12 && hex.chars().all(|c| c.is_ascii_hexdigit()),
        "{id}"
    );
    let cwd = dir.path().to_string_lossy();
    assert_eq!(
        request["params"],
        json!({"type": "HookRequest", "payload": {
            "id": hex, "subscription_id": "sub_pre", "event": "PreToolUse", "target": "Shell",
            "input_data": {
                "hook_event_name": "PreToolUse", "session_id": "sess-1", "cwd": cwd,
                "tool_name": "Shell", "tool_input": {"command": "echo hi"}, "tool_call_id": "tc-1",
            },
        }})
    );
    client
        .respond(
            &id,
            json!({"request_id": hex, "action": "block", "reason": "client says no"}),
        )
        .await;

    let decision = running.await.unwrap();
    assert_eq!(
        decision,
        HookDecision::Block {
            reason: "client says no".into(),
            reasons: vec!["client says no".into()],
        }
    );
    let resolved = client.next_event().await;
    assert_eq!(resolved["payload"]["action"], "block");
    assert_eq!(resolved["payload"]["reason"], "client says no");
}

#[tokio::test]
async fn command_and_wire_hooks_run_in_parallel_and_errors_allow() {
    let dir = tempfile::tempdir().unwrap();
    // The command hook waits for the client to have been asked, so it finishes only if both run at once.
    let engine = engine(
        dir.path(),
        vec![hook(
            HookEvent::Stop,
            "",
            "while [ ! -e asked ]; do sleep 0.01; done; exit 0",
        )],
    );
    let mut client = FakeClient::start();
    engine.attach_wire(vec![subscription("sub_stop", "Stop", "", 30)], sink(&client));
    let running = tokio::spawn({
        let engine = Arc::clone(&engine);
        async move { engine.trigger(HookEvent::Stop, "", input::stop(false)).await }
    });
    assert_eq!(client.next_event().await["payload"]["hook_count"], 2);
    let request = client.next_message().await;
    std::fs::write(dir.path().join("asked"), "").unwrap();
    client
        .send(json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32000, "message": "nope"}}))
        .await;
    assert_eq!(running.await.unwrap(), HookDecision::Allow);
    assert_eq!(client.next_event().await["payload"]["action"], "allow");
}

#[tokio::test]
async fn an_unanswered_wire_hook_allows_after_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), vec![]);
    let mut client = FakeClient::start();
    engine.attach_wire(
        vec![subscription("slow", "UserPromptSubmit", "", 1)],
        sink(&client),
    );
    let running = tokio::spawn({
        let engine = Arc::clone(&engine);
        async move {
            engine
                .trigger(HookEvent::UserPromptSubmit, "hi", input::user_prompt_submit("hi"))
                .await
        }
    });
    client.next_event().await; // HookTriggered
    let request = client.next_message().await;
    assert_eq!(request["params"]["type"], "HookRequest");
    // The hook's own 1 s timeout decides, not the client: a deadline on the awaited decision.
    let decision = tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("the 1 s hook timeout allowed the prompt");
    assert_eq!(decision.unwrap(), HookDecision::Allow);
    assert_eq!(client.next_event().await["payload"]["action"], "allow");
    // A late answer is ignored without harm.
    client
        .respond(
            &request["id"],
            json!({"request_id": request["id"], "action": "block"}),
        )
        .await;
    client.assert_quiet().await;
}

#[tokio::test]
async fn background_triggers_finish_before_shutdown_returns() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(
        dir.path(),
        vec![hook(HookEvent::PostToolUse, "", "cat > post.json")],
    );
    engine.trigger_detached(
        HookEvent::PostToolUse,
        "ReadFile".into(),
        input::post_tool_use("ReadFile", json!({"path": "a"}), "hello", "tc-1"),
    );
    engine.shutdown(READ_TIMEOUT).await;
    let text = std::fs::read_to_string(dir.path().join("post.json")).unwrap();
    let sent: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(sent["tool_output"], "hello");
    assert_eq!(sent["hook_event_name"], "PostToolUse");

    // After shutdown, background triggers are dropped.
    std::fs::remove_file(dir.path().join("post.json")).unwrap();
    engine.trigger_detached(HookEvent::PostToolUse, "ReadFile".into(), Map::new());
    engine.shutdown(READ_TIMEOUT).await;
    assert!(!dir.path().join("post.json").exists());
}

#[tokio::test]
async fn shutdown_aborts_background_hooks_that_overstay() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), vec![hook(HookEvent::Notification, "", "sleep 30")]);
    engine.trigger_detached(HookEvent::Notification, "task".into(), Map::new());
    // A deadline on the awaited shutdown: the 30 s hook is aborted after the 200 ms grace.
    tokio::time::timeout(
        Duration::from_secs(5),
        engine.shutdown(Duration::from_millis(200)),
    )
    .await
    .expect("shutdown aborted the overstaying hook");
}

#[tokio::test]
async fn dropping_a_trigger_kills_its_command_hooks() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let command = format!("sleep 30 & echo $! > '{}'; wait", pid_file.display());
    let engine = engine(dir.path(), vec![hook(HookEvent::PreToolUse, "", &command)]);
    let mut trigger = Box::pin(engine.trigger(HookEvent::PreToolUse, "Shell", pre_tool("Shell")));
    // Poll the trigger until the hook has started its background process, then drop it.
    let deadline = Instant::now() + READ_TIMEOUT;
    while std::fs::read_to_string(&pid_file).map_or(true, |s| s.trim().is_empty()) {
        assert!(Instant::now() < deadline, "the hook never started");
        let _ = tokio::time::timeout(Duration::from_millis(10), &mut trigger).await;
    }
    drop(trigger);
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let stat = format!("/proc/{}/stat", pid.trim());
    while std::fs::read_to_string(&stat)
        .is_ok_and(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
    {
        assert!(
            Instant::now() < deadline,
            "the hook's background process survived"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
