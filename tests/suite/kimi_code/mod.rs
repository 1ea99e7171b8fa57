//! The `kimi-code` agent through the binary (`--agent kimi-code`): one test (at least) per row of the
//! tool tables of shared/seeds/002, with its parameters, defaults, limits, errors and approval
//! defaults. Each test drives the scripted provider (or the mock model, where a later call needs an id
//! an earlier one returned) and reads what the client gets.

mod collaboration;
mod files;
mod offered;
mod plan_mode;
mod shell;
mod tasks;
mod web_and_cron;

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use crate::common::{TestHome, WireProcess, approval_answer, payloads, tool_call_line};

/// One model step calling `calls` (`(id, tool, arguments)`), as a scripted-provider script.
pub(super) fn step(calls: &[(&str, &str, Value)]) -> String {
    let mut script = "text: working".to_owned();
    for (id, name, args) in calls {
        script.push('\n');
        script.push_str(&tool_call_line(id, name, Some(&args.to_string())));
    }
    script
}

/// A home whose model makes `calls` in one step, then ends the turn.
pub(super) fn calling(calls: &[(&str, &str, Value)]) -> Result<TestHome> {
    let first = step(calls);
    TestHome::new()?.scripted(&[first.as_str(), "text: done"])
}

/// The `kimi-code` agent on `home`, initialized by a client that answers questions and knows plan mode.
pub(super) async fn kimi_code(home: TestHome) -> Result<(TestHome, WireProcess)> {
    let home = if home.extra_args.iter().any(|a| a == "--agent") {
        home
    } else {
        home.arg("--agent").arg("kimi-code")
    };
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({
        "protocol_version": "1.10",
        "capabilities": {"supports_question": true, "supports_plan_mode": true}
    }))
    .await?;
    Ok((home, wire))
}

/// What a turn showed the client: its messages, and the approval requests it answered.
pub(super) struct Turn {
    pub messages: Vec<Value>,
    pub approvals: Vec<Value>,
}

impl Turn {
    /// The `return_value` of call `id`.
    pub fn result(&self, id: &str) -> Result<&Value> {
        payloads(&self.messages, "ToolResult")
            .into_iter()
            .find(|p| p["tool_call_id"] == id)
            .map(|p| &p["return_value"])
            .with_context(|| format!("no ToolResult for {id}"))
    }

    /// The text output of call `id` (empty when it is not text).
    pub fn output(&self, id: &str) -> Result<String> {
        Ok(self.result(id)?["output"].as_str().unwrap_or_default().to_owned())
    }

    /// The message of call `id`.
    pub fn message(&self, id: &str) -> Result<String> {
        Ok(self.result(id)?["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned())
    }

    /// Fails when a result tells the model about a tool this agent does not have (K10), but for the
    /// toolset's "not found" answer to a model that called one.
    fn names_only_its_own_tools(&self) -> Result<()> {
        for result in payloads(&self.messages, "ToolResult") {
            let value = &result["return_value"];
            let message = value["message"].as_str().unwrap_or_default();
            let output = value["output"].as_str().unwrap_or_default();
            let not_found = message.starts_with("Tool `") && message.ends_with("` not found");
            for text in [message, output] {
                if let Some(name) = reference_name_in(text).filter(|_| !not_found) {
                    bail!("a result names {name}, which the kimi-code agent lacks: {result}");
                }
            }
        }
        Ok(())
    }

    /// The `action` of every approval request, in order.
    pub fn actions(&self) -> Vec<String> {
        self.approvals
            .iter()
            .filter_map(|r| r["params"]["payload"]["action"].as_str().map(str::to_owned))
            .collect()
    }
}

/// Sends `prompt` and answers every approval request with `answer` until the turn ends.
pub(super) async fn turn_answering(wire: &mut WireProcess, prompt: &str, answer: &str) -> Result<Turn> {
    let id = wire.start_prompt(json!(prompt)).await?;
    let mut messages = Vec::new();
    let mut approvals = Vec::new();
    loop {
        let (found, skipped) = wire
            .read_until(|m| {
                m.get("id").and_then(Value::as_str) == Some(id.as_str()) && m.get("method").is_none()
                    || m["method"] == "request" && m["params"]["type"] == "ApprovalRequest"
            })
            .await?;
        messages.extend(skipped);
        if found["method"] == "request" {
            wire.send(&approval_answer(&found, answer)).await?;
            approvals.push(found.clone());
            messages.push(found);
            continue;
        }
        if found.get("error").is_some() {
            bail!("prompt failed: {found}");
        }
        let turn = Turn { messages, approvals };
        turn.names_only_its_own_tools()?;
        return Ok(turn);
    }
}

/// A turn whose approval requests are all approved.
pub(super) async fn turn(wire: &mut WireProcess, prompt: &str) -> Result<Turn> {
    turn_answering(wire, prompt, "approve").await
}

/// The reference's tools the kimi-code agent has under another name, or not at all.
pub(super) const REFERENCE_ONLY: &[&str] = &[
    "ReadFile",
    "WriteFile",
    "StrReplaceFile",
    "Shell",
    "SetTodoList",
    "SearchWeb",
];

/// The first of [`REFERENCE_ONLY`] that `text` names (as a whole word, as the model would read it).
pub(super) fn reference_name_in(text: &str) -> Option<&'static str> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    REFERENCE_ONLY.iter().copied().find(|name| {
        text.match_indices(name).any(|(at, _)| {
            !text[..at].chars().next_back().is_some_and(is_word)
                && !text[at + name.len()..].chars().next().is_some_and(is_word)
        })
    })
}

/// The error the toolset gives for a tool the agent does not have.
pub(super) fn not_found(name: &str) -> String {
    format!("Tool `{name}` not found")
}
