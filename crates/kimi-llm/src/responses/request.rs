//! The Responses API request body, built from one [`ChatRequest`].
//!
//! Reference: kosong's `OpenAIResponses.generate` and `_convert_message`. The API is used statelessly
//! (`store: false`): the whole history goes in `input` each time, and the model's reasoning travels
//! between turns as `reasoning` items carrying their encrypted content (asked for with
//! `include: ["reasoning.encrypted_content"]` when thinking is on). So:
//! - text and media of a message become one `message` item (`input_text` / `input_image` /
//!   `input_file` for user and system, `output_text` for the assistant);
//! - think parts become `reasoning` items, consecutive parts with the same `encrypted` value in one
//!   item, each part a `summary_text`;
//! - tool calls become `function_call` items and tool results `function_call_output` items;
//! - the system prompt is a `developer` message for OpenAI's own models and a `system` one otherwise.
//!
//! One difference from the reference: a reasoning item without encrypted content (the API returns
//! those when thinking was not asked for) is not sent back, since a stateless request cannot refer to
//! it; nor is a message item left without content.

use kimi_wire::message::ContentPart;
use serde_json::{Map, Value, json};

use crate::media::MediaSource;
use crate::schema_sanitize::sanitize_parameters;
use crate::tool_names::ToolNames;
use crate::{ChatRequest, Message, Role, ToolSpec};

/// A request body plus the tool names the server sees.
#[derive(Debug)]
pub(crate) struct Built {
    pub body: Value,
    pub names: ToolNames,
}

pub(crate) fn build(model: &str, thinking: Option<bool>, request: &ChatRequest<'_>) -> Built {
    let names = ToolNames::new(request.tools);
    let openai_model = is_openai_model(model);
    let mut input = Vec::with_capacity(request.history.len() + 1);
    if !request.system_prompt.is_empty() {
        let role = if openai_model { "developer" } else { "system" };
        input.push(json!({"role": role, "content": request.system_prompt}));
    }
    for message in request.history {
        convert(message, openai_model, &names, &mut input);
    }

    let mut body = Map::new();
    body.insert("model".into(), Value::String(model.to_owned()));
    body.insert("input".into(), Value::Array(input));
    if !request.tools.is_empty() {
        let tools = request.tools.iter().map(|t| tool(t, &names)).collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("store".into(), Value::Bool(false));
    body.insert("stream".into(), Value::Bool(true));
    // Reference: thinking "high" asks for high effort with summaries and the encrypted reasoning;
    // "off" maps to no effort at all, which sends nothing.
    if thinking == Some(true) {
        body.insert("reasoning".into(), json!({"effort": "high", "summary": "auto"}));
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    Built {
        body: Value::Object(body),
        names,
    }
}

/// Whether `model` is one of OpenAI's own, which take `developer` instead of `system` instructions.
///
/// Reference: membership in the OpenAI SDK's list of model names; here by family prefix, so models
/// newer than any list count too.
fn is_openai_model(model: &str) -> bool {
    const PREFIXES: [&str; 4] = ["gpt-", "chatgpt-", "codex-", "computer-use-"];
    if PREFIXES.iter().any(|p| model.starts_with(p)) {
        return true;
    }
    ["o1", "o3", "o4"].iter().any(|family| {
        model
            .strip_prefix(family)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
    })
}

fn tool(tool: &ToolSpec, names: &ToolNames) -> Value {
    json!({
        "type": "function",
        "name": names.wire(&tool.name),
        "description": tool.description,
        "parameters": sanitize_parameters(&tool.parameters),
        "strict": false,
    })
}

fn convert(message: &Message, openai_model: bool, names: &ToolNames, input: &mut Vec<Value>) {
    let role = match message.role {
        Role::System if openai_model => "developer",
        other => other.as_str(),
    };
    if message.role == Role::Tool {
        let output: Vec<Value> = message.content.iter().filter_map(function_output_item).collect();
        input.push(json!({
            "call_id": message.tool_call_id.as_deref().unwrap_or_default(),
            "output": output,
            "type": "function_call_output",
        }));
        return;
    }
    let assistant = message.role == Role::Assistant;
    let mut pending: Vec<&ContentPart> = Vec::new();
    let mut parts = message.content.iter().peekable();
    while let Some(part) = parts.next() {
        let ContentPart::Think(first) = part else {
            pending.push(part);
            continue;
        };
        flush(role, assistant, &mut pending, input);
        let mut summary = vec![json!({"type": "summary_text", "text": first.think})];
        while let Some(ContentPart::Think(next)) = parts.peek() {
            if next.encrypted != first.encrypted {
                break;
            }
            summary.push(json!({"type": "summary_text", "text": next.think}));
            parts.next();
        }
        if let Some(encrypted) = &first.encrypted {
            input.push(json!({"summary": summary, "type": "reasoning", "encrypted_content": encrypted}));
        }
    }
    flush(role, assistant, &mut pending, input);
    for call in &message.tool_calls {
        input.push(json!({
            "arguments": call.function.arguments.as_deref().filter(|a| !a.is_empty()).unwrap_or("{}"),
            "call_id": call.id,
            "name": names.wire(&call.function.name),
            "type": "function_call",
        }));
    }
}

/// Turns the parts gathered since the last reasoning item into one message item.
fn flush(role: &str, assistant: bool, pending: &mut Vec<&ContentPart>, input: &mut Vec<Value>) {
    let content: Vec<Value> = if assistant {
        pending
            .iter()
            .filter_map(|p| p.as_text())
            .filter(|t| !t.is_empty())
            .map(|t| json!({"type": "output_text", "text": t, "annotations": []}))
            .collect()
    } else {
        pending.iter().filter_map(|p| input_item(p)).collect()
    };
    pending.clear();
    if !content.is_empty() {
        input.push(json!({"content": content, "role": role, "type": "message"}));
    }
}

fn input_item(part: &ContentPart) -> Option<Value> {
    match part {
        ContentPart::Text(t) if t.text.is_empty() => None,
        ContentPart::Text(t) => Some(json!({"type": "input_text", "text": t.text})),
        ContentPart::ImageUrl(p) => {
            Some(json!({"type": "input_image", "detail": "auto", "image_url": p.image_url.url}))
        }
        ContentPart::AudioUrl(p) => audio_file(&p.audio_url.url, true),
        ContentPart::Think(_) | ContentPart::VideoUrl(_) => None,
    }
}

fn function_output_item(part: &ContentPart) -> Option<Value> {
    match part {
        ContentPart::Text(t) if t.text.is_empty() => None,
        ContentPart::Text(t) => Some(json!({"type": "input_text", "text": t.text})),
        ContentPart::ImageUrl(p) => Some(json!({"type": "input_image", "image_url": p.image_url.url})),
        ContentPart::AudioUrl(p) => audio_file(&p.audio_url.url, false),
        ContentPart::Think(_) | ContentPart::VideoUrl(_) => None,
    }
}

/// An audio clip as an `input_file` (the API takes no `input_audio` here). Reference: inline clips need
/// an mp3 or wav type, and get a file name in messages.
fn audio_file(url: &str, named: bool) -> Option<Value> {
    match MediaSource::parse(url, "audio").ok()? {
        MediaSource::Remote(url) if url.starts_with("http://") || url.starts_with("https://") => {
            Some(json!({"type": "input_file", "file_url": url}))
        }
        MediaSource::Remote(_) => None,
        MediaSource::Inline { media_type, data } => {
            let mut item = json!({"type": "input_file", "file_data": data});
            if named {
                let subtype = media_type.strip_prefix("audio/")?.to_ascii_lowercase();
                let ext = match subtype.as_str() {
                    "mp3" | "mpeg" => "mp3",
                    "wav" => "wav",
                    _ => return None,
                };
                item["filename"] = Value::String(format!("inline.{ext}"));
            }
            Some(item)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kimi_wire::message::{ThinkPart, ToolCall};
    use pretty_assertions::assert_eq;

    fn signed(think: &str, encrypted: Option<&str>) -> ContentPart {
        ContentPart::Think(ThinkPart {
            think: think.into(),
            encrypted: encrypted.map(str::to_owned),
        })
    }

    #[test]
    fn a_tool_turn_with_encrypted_reasoning_round_trips() {
        let history = [
            Message::user_text("read a"),
            Message::assistant(
                vec![
                    signed("First.", Some("enc-1")),
                    signed("Second.", Some("enc-1")),
                    signed("dropped", None),
                    ContentPart::text("Reading."),
                ],
                vec![ToolCall::new("call_1", "ReadFile", Some(String::new()))],
            ),
            Message::tool("call_1", vec![ContentPart::text("alpha"), ContentPart::text("")]),
        ];
        let tools = [ToolSpec {
            name: "ReadFile".into(),
            description: "Read.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }];
        let request = ChatRequest {
            system_prompt: "Be brief.",
            tools: &tools,
            history: &history,
        };
        let body = build("gpt-5.1-codex", Some(true), &request).body;
        assert_eq!(
            body,
            json!({
                "model": "gpt-5.1-codex",
                "input": [
                    {"role": "developer", "content": "Be brief."},
                    {"content": [{"type": "input_text", "text": "read a"}], "role": "user", "type": "message"},
                    {"summary": [{"type": "summary_text", "text": "First."}, {"type": "summary_text", "text": "Second."}],
                     "type": "reasoning", "encrypted_content": "enc-1"},
                    {"content": [{"type": "output_text", "text": "Reading.", "annotations": []}],
                     "role": "assistant", "type": "message"},
                    {"arguments": "{}", "call_id": "call_1", "name": "ReadFile", "type": "function_call"},
                    {"call_id": "call_1", "output": [{"type": "input_text", "text": "alpha"}],
                     "type": "function_call_output"},
                ],
                "tools": [{"type": "function", "name": "ReadFile", "description": "Read.",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}, "strict": false}],
                "store": false,
                "stream": true,
                "reasoning": {"effort": "high", "summary": "auto"},
                "include": ["reasoning.encrypted_content"],
            })
        );
    }

    #[test]
    fn other_models_get_system_instructions_and_no_reasoning_unless_asked() {
        let request = ChatRequest {
            system_prompt: "Be brief.",
            tools: &[],
            history: &[],
        };
        for thinking in [None, Some(false)] {
            let body = build("qwen3-coder", thinking, &request).body;
            assert_eq!(body["input"], json!([{"role": "system", "content": "Be brief."}]));
            assert_eq!(body.get("reasoning"), None);
            assert_eq!(body.get("include"), None);
        }
        for (model, openai) in [
            ("o3", true),
            ("o4-mini", true),
            ("o30", false),
            ("gpt-4o", true),
            ("kimi-k2", false),
        ] {
            assert_eq!(is_openai_model(model), openai, "{model}");
        }
    }

    /// An image a tool returned (ReadMediaFile) goes back inside the `function_call_output`, beside
    /// the text; a video, which the Responses API does not take, is left out.
    #[test]
    fn images_inside_tool_results() {
        let image = ContentPart::ImageUrl(kimi_wire::message::ImageUrlPart {
            image_url: kimi_wire::message::MediaUrl::new("data:image/png;base64,iVBORw0KGgo="),
        });
        let video = ContentPart::VideoUrl(kimi_wire::message::VideoUrlPart {
            video_url: kimi_wire::message::MediaUrl::new("data:video/mp4;base64,AA"),
        });
        let history = [
            Message::user_text("look"),
            Message::assistant(vec![], vec![ToolCall::new("call_m", "ReadMediaFile", None)]),
            Message::tool("call_m", vec![ContentPart::text("a.png:"), image, video]),
        ];
        let request = ChatRequest {
            system_prompt: "",
            tools: &[],
            history: &history,
        };
        let body = build("gpt-5.1-codex", None, &request).body;
        assert_eq!(
            body["input"][2],
            json!({"call_id": "call_m", "type": "function_call_output", "output": [
                {"type": "input_text", "text": "a.png:"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
            ]})
        );
    }

    #[test]
    fn media_in_messages_and_tool_results() {
        let image = ContentPart::ImageUrl(kimi_wire::message::ImageUrlPart {
            image_url: kimi_wire::message::MediaUrl::new("data:image/png;base64,AA"),
        });
        let audio = ContentPart::AudioUrl(kimi_wire::message::AudioUrlPart {
            audio_url: kimi_wire::message::MediaUrl::new("data:audio/wav;base64,BB"),
        });
        assert_eq!(
            input_item(&image),
            Some(json!({"type": "input_image", "detail": "auto", "image_url": "data:image/png;base64,AA"}))
        );
        assert_eq!(
            input_item(&audio),
            Some(json!({"type": "input_file", "file_data": "BB", "filename": "inline.wav"}))
        );
        assert_eq!(
            function_output_item(&audio),
            Some(json!({"type": "input_file", "file_data": "BB"}))
        );
    }
}
