//! The `generateContent` request body (Gemini API and Vertex AI alike), built from one
//! [`ChatRequest`].
//!
//! Reference: kosong's `GoogleGenAI.generate` and `messages_to_google_genai_contents`:
//! - roles are `user` and `model`; the system prompt is `systemInstruction`;
//! - an assistant message's tool calls are `functionCall` parts, each with the `thoughtSignature` the
//!   model gave it (kept in the call's `extras` as `thought_signature_b64`), which Gemini 3 requires
//!   back;
//! - the results of one assistant turn are packed into one `user` content of `functionResponse` parts,
//!   in the order of the calls (Vertex AI checks that the counts match), each named after its call;
//! - think parts are not sent back (Gemini's thought text is a summary; the signatures carry the state);
//! - each tool is declared with `parametersJsonSchema`.
//!
//! Where we differ: media given by URL are passed as `fileData` URIs instead of being downloaded by the
//! agent, videos are sent (the reference skips them), empty text parts are left out, a system message
//! inside the history is sent as a `user` turn (the API has no other role for it), and arguments that
//! are not a JSON object go back as `{}` (see [`call_arguments`]).

use std::collections::{HashMap, HashSet};

use kimi_wire::message::ContentPart;
use serde_json::{Map, Value, json};

use super::thinking_config;
use crate::media::{MediaSource, guess_media_type, media_url};
use crate::message::call_arguments;
use crate::py::py_repr;
use crate::schema_sanitize::sanitize_parameters;
use crate::tool_names::ToolNames;
use crate::{ChatError, ChatRequest, Message, Role, ToolSpec};

/// The key of a tool call's `extras` holding Gemini's thought signature (reference name).
pub(crate) const THOUGHT_SIGNATURE_KEY: &str = "thought_signature_b64";

/// A request body plus the tool names the server sees.
#[derive(Debug)]
pub(crate) struct Built {
    pub body: Value,
    pub names: ToolNames,
}

pub(crate) fn build(
    model: &str,
    thinking: Option<bool>,
    request: &ChatRequest<'_>,
) -> Result<Built, ChatError> {
    let names = ToolNames::new(request.tools);
    let mut body = Map::new();
    body.insert(
        "contents".into(),
        Value::Array(contents(request.history, &names)?),
    );
    if !request.system_prompt.is_empty() {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": request.system_prompt}], "role": "user"}),
        );
    }
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| json!({"functionDeclarations": [declaration(t, &names)]}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(config) = thinking_config(model, thinking) {
        body.insert("generationConfig".into(), json!({"thinkingConfig": config}));
    }
    Ok(Built {
        body: Value::Object(body),
        names,
    })
}

fn declaration(tool: &ToolSpec, names: &ToolNames) -> Value {
    json!({
        "name": names.wire(&tool.name),
        "description": tool.description,
        "parametersJsonSchema": gemini_schema(&tool.parameters),
    })
}

/// The schema Gemini accepts: references inlined (see [`sanitize_parameters`]), `$comment` dropped and
/// `const` written as a one-value `enum`, which its validator rejects or ignores otherwise.
fn gemini_schema(schema: &Value) -> Value {
    fn walk(node: &mut Value) {
        match node {
            Value::Object(map) => {
                map.remove("$comment");
                if let Some(value) = map.remove("const") {
                    map.entry("enum").or_insert_with(|| Value::Array(vec![value]));
                }
                map.values_mut().for_each(walk);
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    let mut out = sanitize_parameters(schema);
    walk(&mut out);
    out
}

fn contents(history: &[Message], names: &ToolNames) -> Result<Vec<Value>, ChatError> {
    let mut out = Vec::with_capacity(history.len());
    let mut name_by_id: HashMap<&str, &str> = HashMap::new();
    let mut i = 0;
    while i < history.len() {
        let message = &history[i];
        if message.role == Role::Tool {
            // A result without the call just before it (a trimmed history): sent on its own.
            out.push(tool_results(&[message], None, &name_by_id, names)?);
            i += 1;
            continue;
        }
        out.push(content(message, names)?);
        i += 1;
        if message.role == Role::Assistant && !message.tool_calls.is_empty() {
            for call in &message.tool_calls {
                name_by_id.insert(&call.id, &call.function.name);
            }
            let results: Vec<&Message> = history[i..].iter().take_while(|m| m.role == Role::Tool).collect();
            if !results.is_empty() {
                let expected: Vec<&str> = message.tool_calls.iter().map(|c| c.id.as_str()).collect();
                i += results.len();
                out.push(tool_results(&results, Some(&expected), &name_by_id, names)?);
            }
        }
    }
    Ok(out)
}

/// One `user` content holding the function responses of `results`, ordered like `expected` (the
/// calls they answer) when given; every expected call must be answered exactly once.
fn tool_results(
    results: &[&Message],
    expected: Option<&[&str]>,
    name_by_id: &HashMap<&str, &str>,
    names: &ToolNames,
) -> Result<Value, ChatError> {
    let position = |id: &str| {
        expected
            .and_then(|e| e.iter().position(|x| *x == id))
            .unwrap_or(usize::MAX)
    };
    let mut ordered: Vec<(&str, &Message)> = Vec::with_capacity(results.len());
    let mut seen = HashSet::new();
    for message in results {
        let Some(id) = message.tool_call_id.as_deref() else {
            return Err(ChatError::provider("Tool response is missing `tool_call_id`."));
        };
        if !seen.insert(id) {
            return Err(ChatError::provider(format!(
                "Duplicate tool response for id: {id}"
            )));
        }
        ordered.push((id, message));
    }
    // Stable: results with the same position keep their order.
    ordered.sort_by_key(|(id, _)| position(id));
    if let Some(expected) = expected {
        let missing: Vec<&str> = expected.iter().copied().filter(|id| !seen.contains(id)).collect();
        if !missing.is_empty() {
            return Err(ChatError::provider(format!(
                "Missing tool responses for ids: {}",
                py_list(&missing)
            )));
        }
        let extra: Vec<&str> = ordered
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| !expected.contains(id))
            .collect();
        if !extra.is_empty() {
            return Err(ChatError::provider(format!(
                "Unexpected tool responses for ids: {}",
                py_list(&extra)
            )));
        }
    }
    let parts = ordered
        .into_iter()
        .map(|(id, message)| {
            // Reference: ids of the form `<name>_<id>` name their tool when the call is not in sight.
            let ours = name_by_id
                .get(id)
                .copied()
                .unwrap_or_else(|| id.split_once('_').map_or(id, |(name, _)| name));
            let mut text = String::new();
            let mut media = Vec::new();
            for part in &message.content {
                match part {
                    ContentPart::Text(t) => text.push_str(&t.text),
                    ContentPart::Think(_) => {}
                    other => media.extend(media_part(other)?),
                }
            }
            let mut response = json!({"name": names.wire(ours), "response": {"output": text}});
            if !media.is_empty() {
                response["parts"] = Value::Array(media);
            }
            Ok(json!({"functionResponse": response}))
        })
        .collect::<Result<Vec<_>, ChatError>>()?;
    Ok(json!({"role": "user", "parts": parts}))
}

fn py_list(items: &[&str]) -> String {
    let inner: Vec<String> = items.iter().map(|s| py_repr(s)).collect();
    format!("[{}]", inner.join(", "))
}

fn content(message: &Message, names: &ToolNames) -> Result<Value, ChatError> {
    let role = match message.role {
        Role::Assistant => "model",
        Role::User | Role::System | Role::Tool => "user",
    };
    let mut parts = Vec::with_capacity(message.content.len() + message.tool_calls.len());
    for part in &message.content {
        match part {
            ContentPart::Text(t) if t.text.is_empty() => {}
            ContentPart::Text(t) => parts.push(json!({"text": t.text})),
            ContentPart::Think(_) => {}
            other => parts.extend(media_part(other)?),
        }
    }
    for call in &message.tool_calls {
        let args = call_arguments(call);
        let mut part = json!({"functionCall": {"name": names.wire(&call.function.name), "args": args}});
        if let Some(signature) = call
            .extras
            .as_ref()
            .and_then(|e| e.get(THOUGHT_SIGNATURE_KEY))
            .and_then(Value::as_str)
        {
            part["thoughtSignature"] = Value::String(signature.to_owned());
        }
        parts.push(part);
    }
    Ok(json!({"role": role, "parts": parts}))
}

/// An image, audio clip or video as `inlineData` (data URIs) or `fileData` (other URLs).
fn media_part(part: &ContentPart) -> Result<Option<Value>, ChatError> {
    let Some((url, kind)) = media_url(part) else {
        return Ok(None);
    };
    Ok(Some(
        match MediaSource::parse(url, kind).map_err(ChatError::provider)? {
            MediaSource::Inline { media_type, data } => {
                json!({"inlineData": {"mimeType": media_type, "data": data}})
            }
            MediaSource::Remote(url) => {
                json!({"fileData": {"mimeType": guess_media_type(url, kind), "fileUri": url}})
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kimi_wire::message::{ImageUrlPart, MediaUrl, ToolCall, VideoUrlPart};
    use pretty_assertions::assert_eq;

    fn call_with_signature(id: &str, name: &str, args: &str, signature: Option<&str>) -> ToolCall {
        let mut call = ToolCall::new(id, name, Some(args.into()));
        call.extras = signature.map(|s| {
            let mut extras = Map::new();
            extras.insert(THOUGHT_SIGNATURE_KEY.into(), Value::String(s.into()));
            extras
        });
        call
    }

    #[test]
    fn parallel_results_are_packed_in_call_order_with_signatures_kept() {
        let history = [
            Message::user_text("read both"),
            Message::assistant(
                vec![ContentPart::think("hidden"), ContentPart::text("Reading.")],
                vec![
                    call_with_signature("ReadFile_1", "ReadFile", r#"{"path":"a"}"#, Some("c2ln")),
                    call_with_signature("ReadFile_2", "ReadFile", r#"{"path":"b"}"#, None),
                ],
            ),
            Message::tool("ReadFile_2", vec![ContentPart::text("beta")]),
            Message::tool(
                "ReadFile_1",
                vec![
                    ContentPart::text("alpha"),
                    ContentPart::ImageUrl(ImageUrlPart {
                        image_url: MediaUrl::new("data:image/png;base64,AA"),
                    }),
                ],
            ),
        ];
        let tools = [ToolSpec {
            name: "ReadFile".into(),
            description: "Read.".into(),
            parameters: json!({"type": "object", "properties": {"mode": {"const": "x", "$comment": "c"}}}),
        }];
        let request = ChatRequest {
            system_prompt: "Be brief.",
            tools: &tools,
            history: &history,
        };
        let body = build("gemini-2.5-pro", Some(true), &request).unwrap().body;
        assert_eq!(
            body,
            json!({
                "contents": [
                    {"role": "user", "parts": [{"text": "read both"}]},
                    {"role": "model", "parts": [
                        {"text": "Reading."},
                        {"functionCall": {"name": "ReadFile", "args": {"path": "a"}}, "thoughtSignature": "c2ln"},
                        {"functionCall": {"name": "ReadFile", "args": {"path": "b"}}},
                    ]},
                    {"role": "user", "parts": [
                        {"functionResponse": {"name": "ReadFile", "response": {"output": "alpha"},
                            "parts": [{"inlineData": {"mimeType": "image/png", "data": "AA"}}]}},
                        {"functionResponse": {"name": "ReadFile", "response": {"output": "beta"}}},
                    ]},
                ],
                "systemInstruction": {"parts": [{"text": "Be brief."}], "role": "user"},
                "tools": [{"functionDeclarations": [{"name": "ReadFile", "description": "Read.",
                    "parametersJsonSchema": {"type": "object", "properties": {"mode": {"enum": ["x"], "type": "string"}}}}]}],
                "generationConfig": {"thinkingConfig": {"thinkingBudget": 32000, "includeThoughts": true}},
            })
        );
    }

    /// `video_in`: a video given inline goes as `inlineData`, one given by URL as `fileData` with its
    /// type guessed from the extension (the other providers leave videos out).
    #[test]
    fn videos_are_sent_inline_or_by_uri() {
        let video = |url: &str| {
            ContentPart::VideoUrl(VideoUrlPart {
                video_url: MediaUrl::new(url),
            })
        };
        let history = [Message::user(vec![
            ContentPart::text("What happens in these?"),
            video("data:video/mp4;base64,AAAAGGZ0eXA="),
            video("https://example.com/clips/cat.webm?sig=1"),
        ])];
        let request = ChatRequest {
            system_prompt: "",
            tools: &[],
            history: &history,
        };
        let body = build("gemini-2.5-pro", None, &request).unwrap().body;
        assert_eq!(
            body["contents"],
            json!([{"role": "user", "parts": [
                {"text": "What happens in these?"},
                {"inlineData": {"mimeType": "video/mp4", "data": "AAAAGGZ0eXA="}},
                {"fileData": {"mimeType": "video/webm", "fileUri": "https://example.com/clips/cat.webm?sig=1"}},
            ]}])
        );
    }

    #[test]
    fn unanswered_and_stray_results_are_refused_like_the_reference() {
        let calls = vec![ToolCall::new("a", "A", None), ToolCall::new("b", "B", None)];
        let history = [
            Message::assistant(vec![], calls),
            Message::tool("a", vec![ContentPart::text("x")]),
            Message::tool("c", vec![ContentPart::text("y")]),
        ];
        let request = ChatRequest {
            system_prompt: "",
            tools: &[],
            history: &history,
        };
        assert_eq!(
            build("gemini-2.5-flash", None, &request).unwrap_err(),
            ChatError::provider("Missing tool responses for ids: ['b']")
        );
    }
}
