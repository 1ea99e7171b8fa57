//! What a hook is told: the event's own fields (one builder per event, named after the event) and the
//! full payload the engine sends, which puts `hook_event_name`, `session_id` and `cwd` first.
//!
//! Reference: `hooks/events.py`. Field names, their order and their defaults follow it; the
//! truncations its callers apply (`[:2000]`, `[:500]`) are done here so no call site forgets them.

use serde_json::{Map, Value};

/// How much of a tool's output `PostToolUse` hooks see, in characters (reference: `str(ret)[:2000]`).
const TOOL_OUTPUT_CHARS: usize = 2000;
/// How much of a subagent's prompt or response `Subagent*` hooks see, in characters (reference: `[:500]`).
const SUBAGENT_TEXT_CHARS: usize = 500;

/// The payload a hook receives: the common fields, then the event's fields, in order.
pub(crate) fn payload(
    event: &str,
    session_id: &str,
    cwd: &str,
    fields: Map<String, Value>,
) -> Map<String, Value> {
    let mut out = Map::with_capacity(3 + fields.len());
    out.insert("hook_event_name".into(), event.into());
    out.insert("session_id".into(), session_id.into());
    out.insert("cwd".into(), cwd.into());
    // Like Python's `{**base, **fields}`: a field that repeats a common key keeps the first position
    // and takes the later value.
    out.extend(fields);
    out
}

/// `PreToolUse`. A non-object `tool_input` (arguments that did not parse to an object) becomes `{}`,
/// as in the reference.
pub fn pre_tool_use(tool_name: &str, tool_input: Value, tool_call_id: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("tool_name".into(), tool_name.into());
    m.insert("tool_input".into(), object_or_empty(tool_input));
    m.insert("tool_call_id".into(), tool_call_id.into());
    m
}

/// `PostToolUse`; `tool_output` is cut to its first 2000 characters.
pub fn post_tool_use(
    tool_name: &str,
    tool_input: Value,
    tool_output: &str,
    tool_call_id: &str,
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("tool_name".into(), tool_name.into());
    m.insert("tool_input".into(), object_or_empty(tool_input));
    m.insert(
        "tool_output".into(),
        truncate_chars(tool_output, TOOL_OUTPUT_CHARS).into(),
    );
    m.insert("tool_call_id".into(), tool_call_id.into());
    m
}

/// `PostToolUseFailure`: the tool raised instead of returning.
pub fn post_tool_use_failure(
    tool_name: &str,
    tool_input: Value,
    error: &str,
    tool_call_id: &str,
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("tool_name".into(), tool_name.into());
    m.insert("tool_input".into(), object_or_empty(tool_input));
    m.insert("error".into(), error.into());
    m.insert("tool_call_id".into(), tool_call_id.into());
    m
}

/// `UserPromptSubmit`; `prompt` is the text input, or empty when the input is content parts.
pub fn user_prompt_submit(prompt: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("prompt".into(), prompt.into());
    m
}

/// `Stop`. The reference always passes `false`, even for the continuation turn a Stop hook caused.
pub fn stop(stop_hook_active: bool) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("stop_hook_active".into(), stop_hook_active.into());
    m
}

/// `StopFailure`: a step failed; `error_type` is the error's kind (the reference's exception class name).
pub fn stop_failure(error_type: &str, error_message: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("error_type".into(), error_type.into());
    m.insert("error_message".into(), error_message.into());
    m
}

/// `SessionStart`; `source` is `startup` or `resume`.
pub fn session_start(source: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("source".into(), source.into());
    m
}

/// `SessionEnd`; the reference's only `reason` is `exit`.
pub fn session_end(reason: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("reason".into(), reason.into());
    m
}

/// `SubagentStart`; `prompt` is cut to its first 500 characters.
pub fn subagent_start(agent_name: &str, prompt: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("agent_name".into(), agent_name.into());
    m.insert(
        "prompt".into(),
        truncate_chars(prompt, SUBAGENT_TEXT_CHARS).into(),
    );
    m
}

/// `SubagentStop`; `response` is cut to its first 500 characters.
pub fn subagent_stop(agent_name: &str, response: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("agent_name".into(), agent_name.into());
    m.insert(
        "response".into(),
        truncate_chars(response, SUBAGENT_TEXT_CHARS).into(),
    );
    m
}

/// `PreCompact`; `trigger` is `auto`, `manual` or `manual-with-prompt`.
pub fn pre_compact(trigger: &str, token_count: u64) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("trigger".into(), trigger.into());
    m.insert("token_count".into(), token_count.into());
    m
}

/// `PostCompact`.
pub fn post_compact(trigger: &str, estimated_token_count: u64) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("trigger".into(), trigger.into());
    m.insert("estimated_token_count".into(), estimated_token_count.into());
    m
}

/// `Notification`; the reference's root agent passes `sink = "llm"` when notifications reach the model.
pub fn notification(
    sink: &str,
    notification_type: &str,
    title: &str,
    body: &str,
    severity: &str,
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("sink".into(), sink.into());
    m.insert("notification_type".into(), notification_type.into());
    m.insert("title".into(), title.into());
    m.insert("body".into(), body.into());
    m.insert("severity".into(), severity.into());
    m
}

fn object_or_empty(value: Value) -> Value {
    match value {
        Value::Object(_) => value,
        _ => Value::Object(Map::new()),
    }
}

/// The first `max` characters (Unicode scalar values, as Python slices `str`).
fn truncate_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}

/// JSON text exactly as Python's default `json.dumps` writes it, which is what command hooks read on
/// stdin: `", "` and `": "` separators and every non-ASCII character escaped as `\uXXXX`. Scripts that
/// grep the text rather than parse it keep working.
pub(crate) fn python_json(value: &Value) -> String {
    kimi_llm::dumps(value, kimi_llm::Dumps::DEFAULT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn payload_puts_the_common_fields_first() {
        let p = payload(
            "PreToolUse",
            "sess",
            "/w",
            pre_tool_use("Shell", json!({"command": "ls"}), "tc-1"),
        );
        let keys: Vec<&str> = p.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "hook_event_name",
                "session_id",
                "cwd",
                "tool_name",
                "tool_input",
                "tool_call_id"
            ]
        );
        assert_eq!(
            Value::Object(p),
            json!({
                "hook_event_name": "PreToolUse", "session_id": "sess", "cwd": "/w",
                "tool_name": "Shell", "tool_input": {"command": "ls"}, "tool_call_id": "tc-1",
            })
        );
    }

    #[test]
    fn builders_follow_the_reference_field_order() {
        let keys = |m: Map<String, Value>| m.keys().cloned().collect::<Vec<_>>();
        assert_eq!(
            keys(post_tool_use("T", json!({}), "out", "id")),
            ["tool_name", "tool_input", "tool_output", "tool_call_id"]
        );
        assert_eq!(
            keys(post_tool_use_failure("T", json!({}), "boom", "id")),
            ["tool_name", "tool_input", "error", "tool_call_id"]
        );
        assert_eq!(keys(stop_failure("E", "m")), ["error_type", "error_message"]);
        assert_eq!(keys(pre_compact("auto", 1)), ["trigger", "token_count"]);
        assert_eq!(
            keys(post_compact("auto", 1)),
            ["trigger", "estimated_token_count"]
        );
        assert_eq!(
            keys(notification("llm", "task", "t", "b", "info")),
            ["sink", "notification_type", "title", "body", "severity"]
        );
        assert_eq!(keys(subagent_start("coder", "p")), ["agent_name", "prompt"]);
        assert_eq!(keys(subagent_stop("coder", "r")), ["agent_name", "response"]);
    }

    #[test]
    fn non_object_tool_input_becomes_empty_object() {
        assert_eq!(pre_tool_use("T", json!("not json"), "")["tool_input"], json!({}));
        assert_eq!(pre_tool_use("T", Value::Null, "")["tool_input"], json!({}));
    }

    #[test]
    fn long_texts_are_cut_by_characters() {
        let long = "é".repeat(2500);
        let out = post_tool_use("T", json!({}), &long, "");
        assert_eq!(out["tool_output"].as_str().map(|s| s.chars().count()), Some(2000));
        let out = subagent_stop("a", &"x".repeat(600));
        assert_eq!(out["response"].as_str().map(str::len), Some(500));
        assert_eq!(subagent_start("a", "short")["prompt"], json!("short"));
    }

    #[test]
    fn python_json_matches_json_dumps_defaults() {
        let v = json!({"a": [1, true, null], "b": "é\"\n😀", "c": {}, "d": 1.5});
        assert_eq!(
            python_json(&v),
            r#"{"a": [1, true, null], "b": "\u00e9\"\n\ud83d\ude00", "c": {}, "d": 1.5}"#
        );
    }
}
