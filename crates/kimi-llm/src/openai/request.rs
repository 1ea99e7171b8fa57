//! The chat-completions request body, built from one [`ChatRequest`].
//!
//! Messages follow kosong's serialisation (`Message.model_dump(exclude_none=True)`):
//! a lone text part becomes a plain string, other content a list of parts,
//! think parts are taken out and sent back joined under the reasoning key
//! (`reasoning_content` for Kimi, which refuses a thinking-mode history
//! without it). Built as `serde_json` values because the reasoning key is
//! configurable.

use kimi_wire::message::ContentPart;
use serde_json::{Map, Value, json};

use super::{CompletionBudget, Flavor, OpenAiCompatConfig as Settings};
use crate::schema_sanitize::sanitize_parameters;
use crate::tool_names::ToolNames;
use crate::{ChatRequest, Message, Role, ToolSpec};

/// Tokens kept free below the context limit when capping the completion
/// (reference: `DEFAULT_COMPLETION_TOKEN_SAFETY_MARGIN`).
const COMPLETION_SAFETY_MARGIN: u64 = 1_024;
/// Rough token cost of one image, audio clip or video (reference:
/// `MEDIA_TOKEN_ESTIMATE`).
const MEDIA_TOKEN_ESTIMATE: u64 = 2_000;

/// A request body plus the tool names the server sees, for the names
/// [`ToolNames`] had to change.
#[derive(Debug)]
pub(crate) struct Built {
    pub body: Value,
    pub names: ToolNames,
}

pub(crate) fn build(settings: &Settings, request: &ChatRequest<'_>) -> Built {
    let names = ToolNames::new(request.tools);

    let reasoning_key = settings.reasoning_key();
    let mut messages = Vec::with_capacity(request.history.len() + 1);
    if !request.system_prompt.is_empty() {
        messages.push(json!({"role": "system", "content": request.system_prompt}));
    }
    messages.extend(
        request
            .history
            .iter()
            .map(|m| message(m, settings.flavor, reasoning_key, &names)),
    );

    let mut body = Map::new();
    body.insert("model".into(), Value::String(settings.model.clone()));
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| tool(t, settings.flavor, &names))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("stream".into(), Value::Bool(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));

    match settings.flavor {
        Flavor::Kimi => {
            if let Some(max) = completion_cap(settings, request) {
                body.insert("max_completion_tokens".into(), max.into());
            }
            insert_float(&mut body, "temperature", settings.temperature);
            insert_float(&mut body, "top_p", settings.top_p);
            if let Some(key) = &settings.session_id {
                body.insert("prompt_cache_key".into(), Value::String(key.clone()));
            }
            if let Some(on) = settings.thinking {
                let mut thinking = Map::new();
                let kind = if on { "enabled" } else { "disabled" };
                thinking.insert("type".into(), Value::String(kind.into()));
                if let (true, Some(keep)) = (on, &settings.thinking_keep) {
                    thinking.insert("keep".into(), Value::String(keep.clone()));
                }
                body.insert("thinking".into(), Value::Object(thinking));
            }
        }
        Flavor::OpenAiLegacy => {
            insert_float(&mut body, "temperature", settings.temperature);
            insert_float(&mut body, "top_p", settings.top_p);
            if let Some(max) = settings.max_completion_tokens.cap() {
                body.insert("max_completion_tokens".into(), max.into());
            }
            // Reference: thinking on asks for "high" effort and off sends null; with
            // thinking unset, a history holding think parts gets "medium" so servers
            // that insist on an effort beside reasoning content accept it.
            let effort = match settings.thinking {
                Some(true) => Some(Value::String("high".into())),
                Some(false) => Some(Value::Null),
                None if reasoning_key.is_some() && has_think(request.history) => {
                    Some(Value::String("medium".into()))
                }
                None => None,
            };
            if let Some(effort) = effort {
                body.insert("reasoning_effort".into(), effort);
            }
        }
    }
    Built {
        body: Value::Object(body),
        names,
    }
}

fn insert_float(body: &mut Map<String, Value>, key: &str, value: Option<f64>) {
    if let Some(n) = value.and_then(serde_json::Number::from_f64) {
        body.insert(key.into(), Value::Number(n));
    }
}

fn has_think(history: &[Message]) -> bool {
    history
        .iter()
        .any(|m| m.content.iter().any(|p| matches!(p, ContentPart::Think(_))))
}

fn tool(tool: &ToolSpec, flavor: Flavor, names: &ToolNames) -> Value {
    if flavor == Flavor::Kimi && tool.name.starts_with('$') {
        // Kimi's built-in functions are named, not described.
        return json!({"type": "builtin_function", "function": {"name": tool.name}});
    }
    let name = names.wire(&tool.name);
    json!({
        "type": "function",
        "function": {
            "name": name,
            "description": tool.description,
            "parameters": sanitize_parameters(&tool.parameters),
        }
    })
}

fn message(message: &Message, flavor: Flavor, reasoning_key: Option<&str>, names: &ToolNames) -> Value {
    let mut reasoning: Option<String> = None;
    let mut parts: Vec<&ContentPart> = Vec::with_capacity(message.content.len());
    for part in &message.content {
        match part {
            ContentPart::Think(think) => reasoning.get_or_insert_with(String::new).push_str(&think.think),
            other => parts.push(other),
        }
    }
    let mut out = Map::new();
    out.insert("role".into(), Value::String(message.role.as_str().into()));
    if let Some(name) = &message.name {
        out.insert("name".into(), Value::String(name.clone()));
    }
    // Reference (Kimi): an assistant tool-call message whose visible content is
    // blank omits `content`; Kimi for Coding rejects an empty text part.
    let blank = parts
        .iter()
        .all(|p| p.as_text().is_some_and(|t| t.trim().is_empty()));
    let drop_content =
        flavor == Flavor::Kimi && message.role == Role::Assistant && !message.tool_calls.is_empty() && blank;
    if !drop_content {
        out.insert("content".into(), content(&parts));
    }
    if !message.tool_calls.is_empty() {
        let calls = message
            .tool_calls
            .iter()
            .map(|call| {
                let name = names.wire(&call.function.name);
                let mut function = Map::new();
                function.insert("name".into(), Value::String(name.to_owned()));
                if let Some(arguments) = &call.function.arguments {
                    function.insert("arguments".into(), Value::String(arguments.clone()));
                }
                let mut wire = Map::new();
                wire.insert("type".into(), Value::String(call.r#type.clone()));
                wire.insert("id".into(), Value::String(call.id.clone()));
                wire.insert("function".into(), Value::Object(function));
                if let Some(extras) = &call.extras {
                    wire.insert("extras".into(), Value::Object(extras.clone()));
                }
                Value::Object(wire)
            })
            .collect();
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(id) = &message.tool_call_id {
        out.insert("tool_call_id".into(), Value::String(id.clone()));
    }
    if let (Some(key), Some(text)) = (reasoning_key, reasoning) {
        out.insert(key.into(), Value::String(text));
    }
    Value::Object(out)
}

fn content(parts: &[&ContentPart]) -> Value {
    if let [ContentPart::Text(text)] = parts {
        return Value::String(text.text.clone());
    }
    Value::Array(
        parts
            .iter()
            .map(|p| serde_json::to_value(p).unwrap_or(Value::Null))
            .collect(),
    )
}

/// The Kimi `max_completion_tokens` for this request, or `None` when the
/// limit is switched off (reference: `KimiSoul._compute_completion_overrides`
/// and `compute_max_completion_tokens`).
fn completion_cap(settings: &Settings, request: &ChatRequest<'_>) -> Option<u64> {
    let configured = match settings.max_completion_tokens {
        CompletionBudget::Unlimited => return None,
        CompletionBudget::Auto => None,
        CompletionBudget::Cap(n) => Some(n),
    };
    let max_ctx = settings.max_context_size;
    if max_ctx == 0 {
        return Some(configured.unwrap_or(settings.reserved_context_size).max(1));
    }
    let input = estimate_request_tokens(request) + COMPLETION_SAFETY_MARGIN;
    let remaining = max_ctx.saturating_sub(input).max(1);
    Some(configured.unwrap_or(max_ctx).min(remaining).max(1))
}

/// A rough token count of everything the request sends: a quarter token per
/// ASCII character and one per other character, a flat cost per media part
/// (reference: `estimate_request_tokens`).
pub fn estimate_request_tokens(request: &ChatRequest<'_>) -> u64 {
    let tools: u64 = request
        .tools
        .iter()
        .map(|t| {
            text_tokens(&t.name)
                + text_tokens(&t.description)
                + text_tokens(&serde_json::to_string(&t.parameters).unwrap_or_default())
        })
        .sum();
    let history: u64 = request.history.iter().map(message_tokens).sum();
    text_tokens(request.system_prompt) + tools + history
}

fn message_tokens(message: &Message) -> u64 {
    let mut total = text_tokens(message.role.as_str());
    total += message.name.as_deref().map_or(0, text_tokens);
    total += message.tool_call_id.as_deref().map_or(0, text_tokens);
    for part in &message.content {
        total += match part {
            ContentPart::Text(t) => text_tokens(&t.text),
            ContentPart::Think(t) => text_tokens(&t.think),
            ContentPart::ImageUrl(_) | ContentPart::AudioUrl(_) | ContentPart::VideoUrl(_) => {
                MEDIA_TOKEN_ESTIMATE
            }
        };
    }
    for call in &message.tool_calls {
        total += text_tokens(&call.id) + text_tokens(&call.function.name);
        total += call.function.arguments.as_deref().map_or(0, text_tokens);
        if let Some(extras) = &call.extras {
            total += text_tokens(&serde_json::to_string(extras).unwrap_or_default());
        }
    }
    total
}

fn text_tokens(text: &str) -> u64 {
    let (ascii, other) = text.chars().fold(
        (0u64, 0u64),
        |(a, o), c| {
            if c.is_ascii() { (a + 1, o) } else { (a, o + 1) }
        },
    );
    ascii.div_ceil(4) + other
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn token_estimate_counts_like_the_reference() {
        assert_eq!(text_tokens(""), 0);
        assert_eq!(text_tokens("abcd"), 1);
        assert_eq!(text_tokens("abcde"), 2);
        assert_eq!(text_tokens("日本"), 2);
    }

    #[test]
    fn completion_cap_rows() {
        let history = [Message::user_text("x".repeat(4000))];
        let request = ChatRequest {
            system_prompt: "",
            tools: &[],
            history: &history,
        };
        // 1000 (text) + 1 (role "user") + 1024 (margin) = 2025 input tokens.
        let rows = [
            (CompletionBudget::Auto, 10_000, Some(10_000 - 2025)),
            (CompletionBudget::Cap(500), 10_000, Some(500)),
            (CompletionBudget::Cap(9_000), 10_000, Some(10_000 - 2025)),
            (CompletionBudget::Auto, 1_000, Some(1)),
            (CompletionBudget::Auto, 0, Some(50_000)),
            (CompletionBudget::Cap(7), 0, Some(7)),
            (CompletionBudget::Unlimited, 10_000, None),
        ];
        for (budget, max_ctx, expected) in rows {
            let mut settings = Settings::for_tests(Flavor::Kimi);
            settings.max_completion_tokens = budget;
            settings.max_context_size = max_ctx;
            assert_eq!(
                completion_cap(&settings, &request),
                expected,
                "{budget:?} {max_ctx}"
            );
        }
    }
}
