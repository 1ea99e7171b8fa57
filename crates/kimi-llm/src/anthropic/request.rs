//! The Messages API request body, built from one [`ChatRequest`].
//!
//! Reference: kosong's `Anthropic.generate` and `_convert_message`:
//! - the system prompt is a `system` text block; a system message inside the history becomes a user
//!   message `<system>...</system>`;
//! - a tool message becomes a user message holding one `tool_result` block, and consecutive
//!   tool-result-only user messages are merged (the API wants every result of one assistant turn in
//!   one message);
//! - think parts go back as `thinking` blocks with their signature (`ThinkPart.encrypted`), which the
//!   API requires for the turn that called tools; think parts without a signature (from another
//!   provider) are left out; a redacted block's part goes back as the `redacted_thinking` block it
//!   was, data unchanged (the reference sends it as a `thinking` block with the data as signature);
//! - prompt caching: `cache_control: ephemeral` on the system block, on the last tool, and on the last
//!   block of the last message unless that is a thinking block.
//!
//! Where we are more lenient than the reference: empty text blocks (which the API refuses) are left
//! out, and tool-call arguments that are not a JSON object go back as `{}` (see [`call_arguments`]).

use kimi_wire::message::{ContentPart, ToolCall};
use serde_json::{Map, Value, json};

use super::thinking::Thinking;
use crate::media::MediaSource;
use crate::message::call_arguments;
use crate::schema_sanitize::sanitize_parameters;
use crate::tool_names::ToolNames;
use crate::{ChatError, ChatRequest, Message, Role, ToolSpec};

/// `max_tokens` of every request (reference: `default_max_tokens=50000`).
pub(crate) const MAX_TOKENS: u64 = 50_000;

/// Image types the API takes as base64.
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// A request body plus the tool names the server sees.
#[derive(Debug)]
pub(crate) struct Built {
    pub body: Value,
    pub names: ToolNames,
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

pub(crate) fn build(
    model: &str,
    thinking: &Thinking,
    session_id: Option<&str>,
    request: &ChatRequest<'_>,
) -> Result<Built, ChatError> {
    let names = ToolNames::new(request.tools);
    let mut messages: Vec<Value> = Vec::with_capacity(request.history.len());
    for message in request.history {
        let converted = convert(message, &names)?;
        match messages.last_mut() {
            Some(last) if is_tool_result_only(last) && is_tool_result_only(&converted) => {
                if let (Some(Value::Array(into)), Value::Object(mut from)) =
                    (last.get_mut("content"), converted)
                    && let Some(Value::Array(blocks)) = from.remove("content")
                {
                    into.extend(blocks);
                }
            }
            _ => messages.push(converted),
        }
    }
    if let Some(block) = messages
        .last_mut()
        .and_then(|m| m.get_mut("content"))
        .and_then(Value::as_array_mut)
        .and_then(|blocks| blocks.last_mut())
        && !matches!(block["type"].as_str(), Some("thinking" | "redacted_thinking"))
    {
        block["cache_control"] = ephemeral();
    }

    let mut body = Map::new();
    body.insert("model".into(), Value::String(model.to_owned()));
    body.insert("max_tokens".into(), MAX_TOKENS.into());
    body.insert("messages".into(), Value::Array(messages));
    if !request.system_prompt.is_empty() {
        body.insert(
            "system".into(),
            json!([{"type": "text", "text": request.system_prompt, "cache_control": ephemeral()}]),
        );
    }
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request.tools.iter().map(|t| tool(t, &names)).collect();
        if let Some(last) = tools.last_mut() {
            last["cache_control"] = ephemeral();
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("stream".into(), Value::Bool(true));
    if let Some(user) = session_id {
        body.insert("metadata".into(), json!({"user_id": user}));
    }
    thinking.insert_into(&mut body);
    Ok(Built {
        body: Value::Object(body),
        names,
    })
}

/// The tool as the API takes it; `input_schema` must describe an object.
fn tool(tool: &ToolSpec, names: &ToolNames) -> Value {
    let mut schema = sanitize_parameters(&tool.parameters);
    match &mut schema {
        Value::Object(map) => {
            map.entry("type")
                .or_insert_with(|| Value::String("object".into()));
        }
        other => *other = json!({"type": "object"}),
    }
    json!({
        "name": names.wire(&tool.name),
        "description": tool.description,
        "input_schema": schema,
    })
}

fn is_tool_result_only(message: &Value) -> bool {
    message["role"] == "user"
        && message["content"]
            .as_array()
            .is_some_and(|blocks| !blocks.is_empty() && blocks.iter().all(|b| b["type"] == "tool_result"))
}

fn convert(message: &Message, names: &ToolNames) -> Result<Value, ChatError> {
    match message.role {
        Role::System => {
            let text: Vec<&str> = message.content.iter().filter_map(ContentPart::as_text).collect();
            Ok(json!({"role": "user", "content": [
                {"type": "text", "text": format!("<system>{}</system>", text.join("\n"))}
            ]}))
        }
        Role::Tool => {
            let Some(id) = &message.tool_call_id else {
                return Err(ChatError::provider("Tool message missing `tool_call_id`."));
            };
            let mut content = Vec::with_capacity(message.content.len());
            for part in &message.content {
                match part {
                    ContentPart::Text(t) if t.text.is_empty() => {}
                    ContentPart::Text(t) => content.push(json!({"type": "text", "text": t.text})),
                    ContentPart::ImageUrl(p) => content.push(image(&p.image_url.url)?),
                    other => {
                        return Err(ChatError::provider(format!(
                            "Anthropic API does not support {} parts in tool results",
                            other.kind()
                        )));
                    }
                }
            }
            Ok(json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "content": content}
            ]}))
        }
        Role::User | Role::Assistant => {
            let mut blocks = Vec::with_capacity(message.content.len() + message.tool_calls.len());
            for part in &message.content {
                match part {
                    ContentPart::Text(t) if t.text.is_empty() => {}
                    ContentPart::Text(t) => blocks.push(json!({"type": "text", "text": t.text})),
                    ContentPart::ImageUrl(p) => blocks.push(image(&p.image_url.url)?),
                    ContentPart::Think(t) => {
                        if let Some(encrypted) = t.encrypted.as_deref() {
                            blocks.push(match super::redacted_data(encrypted) {
                                Some(data) => json!({"type": "redacted_thinking", "data": data}),
                                None => {
                                    json!({"type": "thinking", "thinking": t.think, "signature": encrypted})
                                }
                            });
                        }
                    }
                    // Reference: the Messages API takes no audio or video; such parts are skipped.
                    ContentPart::AudioUrl(_) | ContentPart::VideoUrl(_) => {}
                }
            }
            blocks.extend(message.tool_calls.iter().map(|call| tool_use(call, names)));
            Ok(json!({"role": message.role.as_str(), "content": blocks}))
        }
    }
}

fn tool_use(call: &ToolCall, names: &ToolNames) -> Value {
    let input = call_arguments(call);
    json!({"type": "tool_use", "id": call.id, "name": names.wire(&call.function.name), "input": input})
}

fn image(url: &str) -> Result<Value, ChatError> {
    match MediaSource::parse(url, "image").map_err(ChatError::provider)? {
        MediaSource::Inline { media_type, data } => {
            if !IMAGE_TYPES.contains(&media_type) {
                return Err(ChatError::provider(format!(
                    "Unsupported media type for base64 image: {media_type}"
                )));
            }
            Ok(json!({"type": "image", "source": {"type": "base64", "data": data, "media_type": media_type}}))
        }
        MediaSource::Remote(url) => Ok(json!({"type": "image", "source": {"type": "url", "url": url}})),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kimi_wire::message::{ImageUrlPart, MediaUrl, ThinkPart};
    use pretty_assertions::assert_eq;

    fn image_part(url: &str) -> ContentPart {
        ContentPart::ImageUrl(ImageUrlPart {
            image_url: MediaUrl::new(url),
        })
    }

    fn build_for(history: &[Message], tools: &[ToolSpec]) -> Value {
        let request = ChatRequest {
            system_prompt: "Be brief.",
            tools,
            history,
        };
        build("claude-sonnet-4-5", &Thinking::Unset, Some("s-1"), &request)
            .unwrap()
            .body
    }

    #[test]
    fn a_tool_turn_round_trips_with_signatures_merged_results_and_cache_marks() {
        let signed = ContentPart::Think(ThinkPart {
            think: "Both files.".into(),
            encrypted: Some("sig-1".into()),
        });
        let history = [
            Message::user_text("read a and b"),
            Message::assistant(
                vec![signed, ContentPart::think("unsigned"), ContentPart::text("")],
                vec![
                    ToolCall::new("toolu_a", "ReadFile", Some(r#"{"path":"a"}"#.into())),
                    ToolCall::new("toolu_b", "mcp:x", Some(String::new())),
                ],
            ),
            Message::tool("toolu_a", vec![ContentPart::text("alpha")]),
            Message::tool("toolu_b", vec![ContentPart::text("beta")]),
        ];
        let tools = [
            ToolSpec {
                name: "ReadFile".into(),
                description: "Read.".into(),
                parameters: json!({"properties": {"path": {"type": "string"}}}),
            },
            ToolSpec {
                name: "mcp:x".into(),
                description: "X.".into(),
                parameters: json!({"type": "object"}),
            },
        ];
        let body = build_for(&history, &tools);
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}])
        );
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "read a and b"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Both files.", "signature": "sig-1"},
                    {"type": "tool_use", "id": "toolu_a", "name": "ReadFile", "input": {"path": "a"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "mcp_x", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": [{"type": "text", "text": "alpha"}]},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "content": [{"type": "text", "text": "beta"}],
                     "cache_control": {"type": "ephemeral"}},
                ]},
            ])
        );
        assert_eq!(
            body["tools"],
            json!([
                {"name": "ReadFile", "description": "Read.", "input_schema":
                    {"type": "object", "properties": {"path": {"type": "string"}}}},
                {"name": "mcp_x", "description": "X.", "input_schema": {"type": "object"},
                 "cache_control": {"type": "ephemeral"}},
            ])
        );
        assert_eq!(body["max_tokens"], 50_000);
        assert_eq!(body["metadata"], json!({"user_id": "s-1"}));
        assert_eq!(body["stream"], true);
    }

    #[test]
    fn images_system_messages_and_refusals() {
        let history = [
            Message::system(vec![ContentPart::text("a"), ContentPart::text("b")]),
            Message::user(vec![
                image_part("data:image/png;base64,AAAA"),
                image_part("https://x/y.png"),
            ]),
        ];
        let body = build_for(&history, &[]);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "<system>a\nb</system>"}]},
                {"role": "user", "content": [
                    {"type": "image", "source": {"type": "base64", "data": "AAAA", "media_type": "image/png"}},
                    {"type": "image", "source": {"type": "url", "url": "https://x/y.png"},
                     "cache_control": {"type": "ephemeral"}},
                ]},
            ])
        );
        assert_eq!(body.get("tools"), None);

        let bad = [Message::user(vec![image_part("data:image/bmp;base64,AA")])];
        let request = ChatRequest {
            system_prompt: "",
            tools: &[],
            history: &bad,
        };
        assert_eq!(
            build("m", &Thinking::Unset, None, &request).unwrap_err(),
            ChatError::provider("Unsupported media type for base64 image: image/bmp")
        );
    }

    /// A redacted block, as the stream decoder keeps it, goes back as the block it was, beside a signed
    /// thinking block, with the data unchanged.
    #[test]
    fn redacted_thinking_goes_back_unchanged() {
        let think = |think: &str, encrypted: String| {
            ContentPart::Think(ThinkPart {
                think: think.into(),
                encrypted: Some(encrypted),
            })
        };
        let history = [
            Message::user_text("go"),
            Message::assistant(
                vec![
                    think("Plan.", "sig-1".into()),
                    think("", super::super::redacted_thinking("EmwKAhgBEgy3va3p+z/w==")),
                ],
                vec![ToolCall::new("toolu_a", "ReadFile", Some("{}".into()))],
            ),
            Message::tool("toolu_a", vec![ContentPart::text("alpha")]),
        ];
        let body = build_for(&history, &[]);
        assert_eq!(
            body["messages"][1]["content"],
            json!([
                {"type": "thinking", "thinking": "Plan.", "signature": "sig-1"},
                {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3p+z/w=="},
                {"type": "tool_use", "id": "toolu_a", "name": "ReadFile", "input": {}},
            ])
        );
    }

    /// What ReadMediaFile returns: text and an image in one tool result, the image as an image block
    /// inside the `tool_result`; a video there is refused as the reference refuses it.
    #[test]
    fn images_inside_tool_results() {
        let history = [
            Message::user_text("look"),
            Message::assistant(
                vec![],
                vec![ToolCall::new("toolu_m", "ReadMediaFile", Some("{}".into()))],
            ),
            Message::tool(
                "toolu_m",
                vec![
                    ContentPart::text("a.png:"),
                    image_part("data:image/png;base64,iVBORw0KGgo="),
                    ContentPart::text("(1x1)"),
                ],
            ),
        ];
        let body = build_for(&history, &[]);
        assert_eq!(
            body["messages"][2],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_m", "content": [
                    {"type": "text", "text": "a.png:"},
                    {"type": "image", "source": {"type": "base64", "data": "iVBORw0KGgo=", "media_type": "image/png"}},
                    {"type": "text", "text": "(1x1)"},
                ], "cache_control": {"type": "ephemeral"}},
            ]})
        );

        let video = ContentPart::VideoUrl(kimi_wire::message::VideoUrlPart {
            video_url: MediaUrl::new("data:video/mp4;base64,AA"),
        });
        let history = [
            Message::assistant(vec![], vec![ToolCall::new("toolu_v", "ReadMediaFile", None)]),
            Message::tool("toolu_v", vec![video]),
        ];
        let request = ChatRequest {
            system_prompt: "",
            tools: &[],
            history: &history,
        };
        assert_eq!(
            build("m", &Thinking::Unset, None, &request).unwrap_err(),
            ChatError::provider("Anthropic API does not support video_url parts in tool results")
        );
    }

    #[test]
    fn the_last_thinking_block_is_not_marked_for_caching() {
        let history = [Message::assistant(
            vec![ContentPart::Think(ThinkPart {
                think: "t".into(),
                encrypted: Some("s".into()),
            })],
            vec![],
        )];
        let body = build_for(&history, &[]);
        assert_eq!(
            body["messages"][0]["content"],
            json!([{"type": "thinking", "thinking": "t", "signature": "s"}])
        );
    }
}
