//! Hooks seen from outside: `[[hooks]]` commands from the config and wire subscriptions from
//! `initialize.hooks`, blocking or allowing tool calls and prompts, with their HookTriggered and
//! HookResolved events.

use anyhow::{Context as _, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{
    READ_TIMEOUT, TestHome, WireProcess, is_alive, kinds, payloads, shell_call_line, wait_for_pid,
    wait_until_gone,
};

/// A home whose scripted config also has `hooks`.
fn home_with_hooks(scripts: &[&str], hooks: Value) -> Result<TestHome> {
    let mut home = TestHome::new()?;
    let path = home.scripted_config(scripts, json!({}))?;
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    config["hooks"] = hooks;
    std::fs::write(&path, serde_json::to_string(&config)?)?;
    home.config = Some(path);
    Ok(home)
}

fn touch_step() -> String {
    format!("text: touching\n{}", shell_call_line("tc-1", "touch marker"))
}

fn tool_results(messages: &[Value]) -> Vec<&Value> {
    payloads(messages, "ToolResult")
}

/// The HookTriggered and HookResolved payloads, with `duration_ms` checked and dropped.
fn hook_events(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| {
            m["method"] == "event"
                && matches!(
                    m["params"]["type"].as_str(),
                    Some("HookTriggered" | "HookResolved")
                )
        })
        .map(|m| {
            let mut payload = m["params"]["payload"].clone();
            if let Some(map) = payload.as_object_mut()
                && let Some(duration) = map.remove("duration_ms")
            {
                assert!(duration.is_u64(), "{duration}");
            }
            json!({"type": m["params"]["type"], "payload": payload})
        })
        .collect()
}

fn triggered(event: &str, target: &str) -> Value {
    json!({"type": "HookTriggered", "payload": {"event": event, "target": target, "hook_count": 1}})
}

fn resolved(event: &str, target: &str, action: &str, reason: &str) -> Value {
    json!({"type": "HookResolved", "payload": {"event": event, "target": target, "action": action, "reason": reason}})
}

fn blocked(reason: &str) -> Value {
    json!({"is_error": true, "output": "", "message": reason,
           "display": [{"type": "brief", "text": "Hook blocked"}], "extras": null})
}

#[tokio::test]
async fn a_pre_tool_use_hook_exiting_2_blocks_with_its_stderr() -> Result<()> {
    let hooks = json!([{
        "event": "PreToolUse", "matcher": "^Shell$",
        "command": "cat > seen.json; echo 'no shell today' >&2; exit 2",
    }]);
    let home = home_with_hooks(&[&touch_step(), "text: done"], hooks)?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (response, messages) = wire.prompt(json!("touch it")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    // Blocked before approval: nothing is asked, nothing runs, and the turn goes on.
    assert!(
        !kinds(&messages).iter().any(|k| k.starts_with("request:")),
        "{:?}",
        kinds(&messages)
    );
    assert_eq!(
        tool_results(&messages),
        vec![&json!({"tool_call_id": "tc-1", "return_value": blocked("no shell today")})]
    );
    assert!(!home.work().join("marker").exists());
    assert_eq!(payloads(&messages, "StepBegin").len(), 2);
    assert_eq!(
        hook_events(&messages),
        vec![
            triggered("PreToolUse", "Shell"),
            resolved("PreToolUse", "Shell", "block", "no shell today"),
        ]
    );
    // The hook read the event as JSON on stdin, in the work dir.
    let seen: Value = serde_json::from_str(&std::fs::read_to_string(home.work().join("seen.json"))?)?;
    assert_eq!(seen["hook_event_name"], "PreToolUse");
    assert_eq!(seen["tool_name"], "Shell");
    assert_eq!(seen["tool_input"], json!({"command": "touch marker"}));
    assert_eq!(seen["tool_call_id"], "tc-1");
    Ok(())
}

#[tokio::test]
async fn a_pre_tool_use_hook_can_deny_with_a_json_decision() -> Result<()> {
    let decision = json!({"hookSpecificOutput": {
        "permissionDecision": "deny", "permissionDecisionReason": "policy says no"}});
    let hooks = json!([{
        "event": "PreToolUse", "matcher": "Shell",
        "command": format!("echo '{decision}'"),
    }]);
    let home = home_with_hooks(&[&touch_step(), "text: done"], hooks)?.arg("--yolo");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (_, messages) = wire.prompt(json!("touch it")).await?;
    assert_eq!(
        tool_results(&messages)[0]["return_value"],
        blocked("policy says no")
    );
    Ok(())
}

#[tokio::test]
async fn a_hook_that_does_not_match_or_allows_lets_the_call_run() -> Result<()> {
    let hooks = json!([
        {"event": "PreToolUse", "matcher": "^ReadFile$", "command": "exit 2"},
        {"event": "PreToolUse", "matcher": "Sh.ll", "command": "exit 0"},
    ]);
    let home = home_with_hooks(&[&touch_step(), "text: done"], hooks)?.arg("--yolo");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (_, messages) = wire.prompt(json!("touch it")).await?;
    assert_eq!(
        tool_results(&messages)[0]["return_value"]["is_error"],
        json!(false)
    );
    assert!(home.work().join("marker").exists());
    let events = hook_events(&messages);
    assert_eq!(events[0], triggered("PreToolUse", "Shell"));
    assert_eq!(events[1], resolved("PreToolUse", "Shell", "allow", ""));
    Ok(())
}

#[tokio::test]
async fn a_user_prompt_submit_hook_blocks_the_prompt() -> Result<()> {
    let hooks = json!([{
        "event": "UserPromptSubmit", "matcher": "secret",
        "command": "echo 'prompts about secrets are closed' >&2; exit 2",
    }]);
    let home = home_with_hooks(&["text: fine", "text: never"], hooks)?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (response, messages) = wire.prompt(json!("tell me the secret")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert!(
        payloads(&messages, "StepBegin").is_empty(),
        "{:?}",
        kinds(&messages)
    );
    assert_eq!(
        payloads(&messages, "ContentPart"),
        vec![&json!({"type": "text", "text": "prompts about secrets are closed"})]
    );
    assert_eq!(
        hook_events(&messages),
        vec![
            triggered("UserPromptSubmit", "tell me the secret"),
            resolved(
                "UserPromptSubmit",
                "tell me the secret",
                "block",
                "prompts about secrets are closed"
            ),
        ]
    );
    // A prompt the matcher does not select goes to the model.
    let (_, messages) = wire.prompt(json!("hello")).await?;
    assert_eq!(
        payloads(&messages, "ContentPart"),
        vec![&json!({"type": "text", "text": "fine"})]
    );
    Ok(())
}

/// `initialize` params subscribing to PreToolUse for Shell.
fn subscribe_pre_tool_use() -> Value {
    json!({"protocol_version": "1.10", "hooks": [
        {"id": "sub-1", "event": "PreToolUse", "matcher": "^Shell$", "timeout": 30},
        {"id": "sub-2", "event": "PreToolUse", "matcher": "^ReadFile$", "timeout": 30},
    ]})
}

#[tokio::test]
async fn a_wire_hook_answered_block_blocks_the_call() -> Result<()> {
    let home = TestHome::new()?
        .scripted(&[&touch_step(), "text: done"])?
        .arg("--yolo");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(subscribe_pre_tool_use()).await?;
    let prompt = wire.start_prompt(json!("touch it")).await?;
    let request = wire.wait_request("HookRequest").await?;
    let payload = &request["params"]["payload"];
    assert_eq!(payload["subscription_id"], "sub-1");
    assert_eq!(payload["event"], "PreToolUse");
    assert_eq!(payload["target"], "Shell");
    assert_eq!(
        payload["input_data"]["tool_input"],
        json!({"command": "touch marker"})
    );
    let id = request["id"].as_str().context("request id")?;
    wire.respond(
        id,
        json!({"request_id": payload["id"], "action": "block", "reason": "the client says no"}),
    )
    .await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        tool_results(&messages)[0]["return_value"],
        blocked("the client says no")
    );
    assert!(!home.work().join("marker").exists());
    // One subscription matched: one request.
    assert!(!kinds(&messages).iter().any(|k| k == "request:HookRequest"));
    Ok(())
}

#[tokio::test]
async fn a_wire_hook_answered_with_garbage_allows_the_call() -> Result<()> {
    let home = TestHome::new()?
        .scripted(&[&touch_step(), "text: done"])?
        .arg("--yolo");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(subscribe_pre_tool_use()).await?;
    let prompt = wire.start_prompt(json!("touch it")).await?;
    let request = wire.wait_request("HookRequest").await?;
    let id = request["id"].as_str().context("request id")?;
    wire.respond(id, json!({"action": ["not", "an", "action"], "reason": 7}))
        .await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        tool_results(&messages)[0]["return_value"]["is_error"],
        json!(false)
    );
    assert!(home.work().join("marker").exists());
    Ok(())
}

#[tokio::test]
async fn without_initialize_hooks_still_block_but_send_no_events() -> Result<()> {
    let hooks = json!([{"event": "PreToolUse", "matcher": "Shell", "command": "echo nope >&2; exit 2"}]);
    let home = home_with_hooks(&[&touch_step(), "text: done"], hooks)?;
    let mut wire = WireProcess::spawn(&home).await?;
    let (response, messages) = wire.prompt(json!("touch it")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(tool_results(&messages)[0]["return_value"], blocked("nope"));
    assert_eq!(hook_events(&messages), Vec::<Value>::new());
    Ok(())
}

/// A hook runs in a process group watched by the process guardian, as Shell commands and MCP servers
/// do: an agent killed with SIGKILL (no cleanup of its own) leaves nothing the hook started running.
#[tokio::test]
async fn no_hook_child_outlives_a_sigkilled_agent() -> Result<()> {
    let pid_dir = tempfile::tempdir()?;
    let pid_file = pid_dir.path().join("sleeper");
    let hooks = json!([{
        "event": "UserPromptSubmit", "timeout": 600,
        "command": format!("sleep 1000 & echo $! > '{}'; wait", pid_file.display()),
    }]);
    let home = home_with_hooks(&["text: hi"], hooks)?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    wire.start_prompt(json!("go")).await?;
    let pid = wait_for_pid(&pid_file).await?;
    assert!(is_alive(pid), "the hook's child should be running");

    wire.child.start_kill()?;
    tokio::time::timeout(READ_TIMEOUT, wire.child.wait()).await??;
    // The guardian acts when it sees its pipe close, a moment after our wait returns.
    wait_until_gone(pid, "the hook's child after the agent's SIGKILL").await?;
    Ok(())
}
