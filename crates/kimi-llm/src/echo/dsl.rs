//! The echo DSL: a script of `kind: payload` lines turned into stream events.
//!
//! Grammar, line by line (Python's `str.splitlines()` boundaries, numbered
//! from 1):
//!
//! - The line is stripped of surrounding whitespace. Empty lines, lines
//!   starting with `#` or with a markdown fence and a bare `echo` (any case)
//!   are skipped.
//! - Everything before the first `:` is the kind (stripped, lower-cased); a
//!   single space right after the `:` is dropped from the payload.
//! - `error:` fails the whole script at once, before anything streams.
//! - `id:` and `usage:` set the message id and token usage (last one wins).
//! - `text`, `think`, `image_url`, `audio_url`, `video_url`, `tool_call` and
//!   `tool_call_part` each produce one streamed part.
//!
//! Values in `key=value` lists and in media/tool-call-part payloads are read
//! like the reference does: empty, `null` or `none` is null; otherwise JSON
//! if it parses; otherwise the text with one pair of matching quotes removed.
//!
//! Deviations, all on inputs nobody writes on purpose: Python's JSON reader
//! also takes the literals `NaN` and `Infinity`, ours does not (such payloads
//! fall to the non-JSON reading). Token counts are unsigned here, so a negative
//! usage value becomes 0. Status codes outside `0..=65535` keep their text in
//! the message but the code saturates. A non-string, non-null
//! `tool_call_part` value makes the reference raise a pydantic
//! `ValidationError` (not a provider error); we return the same text as a
//! [`ChatError::Provider`].

use kimi_wire::message::{
    AudioUrlPart, ContentPart, FunctionBody, ImageUrlPart, MediaUrl, TextPart, ThinkPart, TokenUsage,
    ToolCall, ToolCallPart, VideoUrlPart,
};
use serde_json::{Map, Value};

use crate::py::{
    dumps_compact, parse_int, py_repr, repr_json, split_whitespace, splitlines, strip, truthy, type_name,
};
use crate::{ChatError, StreamEvent};

/// A parsed script: the events one `generate()` call streams.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParsedScript {
    /// In streaming order: the message id first (when the script sets one),
    /// then every part in script order, then the usage (when set).
    pub events: Vec<StreamEvent>,
}

impl ParsedScript {
    /// Whether the script produced at least one part besides id and usage.
    /// A script without parts is an error for both echo providers.
    pub fn has_parts(&self) -> bool {
        self.events
            .iter()
            .any(|e| !matches!(e, StreamEvent::MessageId(_) | StreamEvent::Usage(_)))
    }
}

/// Parses an echo DSL script.
///
/// Fails on the first bad line with the reference's exact message; an
/// `error:` line fails with the simulated error it describes.
pub fn parse_script(script: &str) -> Result<ParsedScript, ChatError> {
    let mut parts = Vec::new();
    let mut message_id = None;
    let mut usage = None;

    for (index, raw_line) in splitlines(script).into_iter().enumerate() {
        let lineno = index + 1;
        let line = strip(raw_line);
        if line.is_empty() || line.starts_with('#') || line.starts_with("```") {
            continue;
        }
        if line.to_lowercase() == "echo" {
            continue;
        }
        let Some((key, payload)) = line.split_once(':') else {
            return Err(ChatError::provider(format!(
                "Invalid echo DSL at line {lineno}: {}",
                py_repr(raw_line)
            )));
        };
        let kind = strip(key).to_lowercase();
        let payload = payload.strip_prefix(' ').unwrap_or(payload);
        match kind.as_str() {
            "error" => return Err(simulated_error(strip(payload), lineno, raw_line)),
            "id" => message_id = Some(strip_quotes(strip(payload)).to_owned()),
            "usage" => usage = Some(parse_usage(payload)?),
            _ => parts.push(parse_part(&kind, payload, lineno, raw_line)?),
        }
    }

    let mut events = Vec::with_capacity(parts.len() + 2);
    events.extend(message_id.map(StreamEvent::MessageId));
    events.extend(parts);
    events.extend(usage.map(StreamEvent::Usage));
    Ok(ParsedScript { events })
}

fn parse_part(kind: &str, payload: &str, lineno: usize, raw_line: &str) -> Result<StreamEvent, ChatError> {
    let part = match kind {
        "text" => ContentPart::Text(TextPart {
            text: strip_quotes(payload).to_owned(),
        }),
        "think" => ContentPart::Think(ThinkPart {
            think: strip_quotes(payload).to_owned(),
            encrypted: None,
        }),
        "image_url" => ContentPart::ImageUrl(ImageUrlPart {
            image_url: parse_media_url(payload, kind)?,
        }),
        "audio_url" => ContentPart::AudioUrl(AudioUrlPart {
            audio_url: parse_media_url(payload, kind)?,
        }),
        "video_url" => ContentPart::VideoUrl(VideoUrlPart {
            video_url: parse_media_url(payload, kind)?,
        }),
        "tool_call" => return parse_tool_call(payload, lineno, raw_line).map(StreamEvent::ToolCall),
        "tool_call_part" => return parse_tool_call_part(payload).map(StreamEvent::ToolCallPart),
        _ => {
            return Err(ChatError::provider(format!(
                "Unknown echo DSL kind '{kind}' at line {lineno}: {}",
                py_repr(raw_line)
            )));
        }
    };
    Ok(StreamEvent::Part(part))
}

fn parse_usage(payload: &str) -> Result<TokenUsage, ChatError> {
    let mapping = parse_mapping(payload, "usage")?;
    let field = |key: &str| -> Result<u64, ChatError> {
        let value = match mapping.get(key) {
            None => return Ok(0),
            Some(value) => value,
        };
        let not_int = || {
            ChatError::provider(format!(
                "Usage field '{key}' must be an integer, got {}",
                repr_json(value)
            ))
        };
        let int: i128 = match value {
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    i128::from(i)
                } else if let Some(u) = n.as_u64() {
                    i128::from(u)
                } else {
                    let f = n.as_f64().ok_or_else(not_int)?;
                    if f.is_nan() {
                        return Err(not_int());
                    }
                    // Python's int(float) truncates toward zero.
                    f.trunc() as i128
                }
            }
            Value::Bool(b) => i128::from(*b),
            Value::String(s) => parse_int(s).ok_or_else(not_int)?,
            Value::Null | Value::Array(_) | Value::Object(_) => return Err(not_int()),
        };
        Ok(u64::try_from(int.max(0)).unwrap_or(u64::MAX))
    };
    Ok(TokenUsage {
        input_other: field("input_other")?,
        output: field("output")?,
        input_cache_read: field("input_cache_read")?,
        input_cache_creation: field("input_cache_creation")?,
    })
}

fn parse_media_url(payload: &str, kind: &str) -> Result<MediaUrl, ChatError> {
    match parse_value(payload) {
        Value::Object(map) => {
            let Some(Value::String(url)) = map.get("url") else {
                return Err(ChatError::provider(format!(
                    "{kind} requires a url field, got {}",
                    repr_json(&Value::Object(map))
                )));
            };
            let id = match map.get("id") {
                None | Some(Value::Null) => None,
                Some(Value::String(id)) => Some(id.clone()),
                Some(_) => {
                    return Err(ChatError::provider(format!(
                        "{kind} id must be a string when provided."
                    )));
                }
            };
            Ok(MediaUrl { url: url.clone(), id })
        }
        Value::String(url) => Ok(MediaUrl { url, id: None }),
        other => Err(ChatError::provider(format!(
            "{kind} expects url string or object, got {}",
            repr_json(&other)
        ))),
    }
}

fn parse_tool_call(payload: &str, lineno: usize, raw_line: &str) -> Result<ToolCall, ChatError> {
    let mapping = parse_mapping(payload, "tool_call")?;
    // The reference only consults `function` when it is a non-empty object.
    let function = match mapping.get("function") {
        Some(Value::Object(f)) if !f.is_empty() => Some(f),
        _ => None,
    };
    let from_function = |key: &str| function.and_then(|f| f.get(key)).filter(|v| !v.is_null());
    let present = |key: &str| mapping.get(key).filter(|v| !v.is_null());

    let id = mapping.get("id");
    let name = match mapping.get("name") {
        Some(value) if truthy(value) => Some(value),
        _ => function.and_then(|f| f.get("name")),
    };
    let arguments = present("arguments").or_else(|| from_function("arguments"));
    let extras = present("extras").or_else(|| from_function("extras"));

    let (Some(Value::String(id)), Some(Value::String(name))) = (id, name) else {
        return Err(ChatError::provider(format!(
            "tool_call requires string id and name at line {lineno}: {}",
            py_repr(raw_line)
        )));
    };
    let arguments = match arguments {
        None => None,
        Some(Value::String(arguments)) => Some(arguments.clone()),
        Some(other) => {
            return Err(ChatError::provider(format!(
                "tool_call.arguments must be a string at line {lineno}, got {}",
                type_name(other)
            )));
        }
    };
    let extras = match extras {
        Some(Value::Object(extras)) => Some(extras.clone()),
        _ => None,
    };
    Ok(ToolCall {
        r#type: "function".to_owned(),
        id: id.clone(),
        function: FunctionBody {
            name: name.clone(),
            arguments,
        },
        extras,
    })
}

fn parse_tool_call_part(payload: &str) -> Result<ToolCallPart, ChatError> {
    let value = match parse_value(payload) {
        Value::Object(map) => map.get("arguments_part").cloned().unwrap_or(Value::Null),
        other => other,
    };
    let arguments_part = match value {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::String(s) => Some(s),
        nested @ (Value::Array(_) | Value::Object(_)) => Some(dumps_compact(&nested)),
        other @ (Value::Bool(_) | Value::Number(_)) => {
            // The reference hands this to pydantic, which rejects it.
            return Err(ChatError::provider(format!(
                "1 validation error for ToolCallPart\narguments_part\n  Input should be a valid \
                 string [type=string_type, input_value={}, input_type={}]\n    For further \
                 information visit https://errors.pydantic.dev/2.12/v/string_type",
                repr_json(&other),
                type_name(&other)
            )));
        }
    };
    Ok(ToolCallPart { arguments_part })
}

/// Reads an `error:` payload into the simulated error it asks for.
fn simulated_error(payload: &str, lineno: usize, raw_line: &str) -> ChatError {
    if payload.is_empty() {
        return ChatError::provider(format!(
            "Empty error payload at line {lineno}: {}",
            py_repr(raw_line)
        ));
    }
    let (first, rest) = payload.split_once(' ').unwrap_or((payload, ""));
    let message = strip(rest);
    let message = |default: String| {
        if message.is_empty() {
            default
        } else {
            message.to_owned()
        }
    };
    match first.to_lowercase().as_str() {
        "connection" => ChatError::Connection {
            message: message("Simulated connection error".to_owned()),
        },
        "timeout" => ChatError::Timeout {
            message: message("Simulated timeout error".to_owned()),
        },
        _ => match parse_int(first) {
            Some(code) => ChatError::status(
                u16::try_from(code.max(0)).unwrap_or(u16::MAX),
                message(format!("Simulated {code} error")),
            ),
            None => ChatError::provider(format!(
                "Invalid error spec at line {lineno}: expected status code or \
                 'connection'/'timeout', got {}",
                py_repr(first)
            )),
        },
    }
}

/// An object payload, given as JSON or as `key=value` tokens separated by
/// commas or whitespace.
fn parse_mapping(raw: &str, context: &str) -> Result<Map<String, Value>, ChatError> {
    let raw = strip(raw);
    match load_json(raw) {
        Some(Value::Object(map)) => return Ok(map),
        Some(Value::Null) | None => {}
        Some(other) => {
            return Err(ChatError::provider(format!(
                "{context} payload must be an object, got {}",
                repr_json(&other)
            )));
        }
    }
    let mut mapping = Map::new();
    let spaced = raw.replace(',', " ");
    for token in split_whitespace(&spaced) {
        let Some((key, value)) = token.split_once('=') else {
            return Err(ChatError::provider(format!(
                "Invalid token '{token}' in {context} payload."
            )));
        };
        mapping.insert(strip(key).to_owned(), parse_value(strip(value)));
    }
    if mapping.is_empty() {
        return Err(ChatError::provider(format!("{context} payload cannot be empty.")));
    }
    Ok(mapping)
}

/// One loosely typed value: null, JSON, or quote-stripped text.
fn parse_value(raw: &str) -> Value {
    let raw = strip(raw);
    if raw.is_empty() {
        return Value::Null;
    }
    let lowered = raw.to_lowercase();
    if lowered == "null" || lowered == "none" {
        return Value::Null;
    }
    load_json(raw).unwrap_or_else(|| Value::String(strip_quotes(raw).to_owned()))
}

fn load_json(raw: &str) -> Option<Value> {
    serde_json::from_str(raw).ok()
}

/// Removes one pair of matching single or double quotes around the text.
fn strip_quotes(value: &str) -> &str {
    let mut chars = value.chars();
    match (chars.next(), chars.next_back()) {
        (Some(first), Some(last)) if first == last && (first == '\'' || first == '"') => {
            &value[1..value.len() - 1]
        }
        _ => value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn text(s: &str) -> StreamEvent {
        StreamEvent::Part(ContentPart::Text(TextPart { text: s.into() }))
    }

    fn media(url: &str, id: Option<&str>) -> MediaUrl {
        MediaUrl {
            url: url.into(),
            id: id.map(Into::into),
        }
    }

    fn call(id: &str, name: &str, arguments: Option<&str>) -> StreamEvent {
        StreamEvent::ToolCall(ToolCall::new(id, name, arguments.map(Into::into)))
    }

    fn call_part(part: Option<&str>) -> StreamEvent {
        StreamEvent::ToolCallPart(ToolCallPart {
            arguments_part: part.map(Into::into),
        })
    }

    fn usage(input_other: u64, output: u64, read: u64, creation: u64) -> StreamEvent {
        StreamEvent::Usage(TokenUsage {
            input_other,
            output,
            input_cache_read: read,
            input_cache_creation: creation,
        })
    }

    /// One row per directive form.
    #[test]
    fn directives() {
        let extras = json!({"k": 1}).as_object().cloned();
        let rows: Vec<(&str, Vec<StreamEvent>)> = vec![
            ("text: hello", vec![text("hello")]),
            ("text:hello", vec![text("hello")]),
            ("text:   two spaces", vec![text("  two spaces")]),
            ("text: 'quoted'", vec![text("quoted")]),
            ("text: \"double\"", vec![text("double")]),
            ("text: 'mismatched\"", vec![text("'mismatched\"")]),
            (
                "TEXT : kind is case-insensitive",
                vec![text("kind is case-insensitive")],
            ),
            ("text: a: b", vec![text("a: b")]),
            ("text:", vec![text("")]),
            (
                "think: hmm",
                vec![StreamEvent::Part(ContentPart::Think(ThinkPart {
                    think: "hmm".into(),
                    encrypted: None,
                }))],
            ),
            ("# comment\n```\necho\nECHO\n\n   \ntext: x", vec![text("x")]),
            (
                "text: a\r\ntext: b\rtext: c",
                vec![text("a"), text("b"), text("c")],
            ),
            (
                "id: 'msg-1'\ntext: x",
                vec![StreamEvent::MessageId("msg-1".into()), text("x")],
            ),
            (
                "usage: {\"input_other\": 10, \"output\": 2}\ntext: x",
                vec![text("x"), usage(10, 2, 0, 0)],
            ),
            (
                "usage: input_other=1,output=2 input_cache_read=3 input_cache_creation=4\ntext: x",
                vec![text("x"), usage(1, 2, 3, 4)],
            ),
            (
                "usage: output=\"7\" input_other=2.9 input_cache_read=true\ntext: x",
                vec![text("x"), usage(2, 7, 1, 0)],
            ),
            (
                "image_url: https://example.com/a.png",
                vec![StreamEvent::Part(ContentPart::ImageUrl(ImageUrlPart {
                    image_url: media("https://example.com/a.png", None),
                }))],
            ),
            (
                "audio_url: {\"url\": \"a.mp3\", \"id\": \"a-1\"}",
                vec![StreamEvent::Part(ContentPart::AudioUrl(AudioUrlPart {
                    audio_url: media("a.mp3", Some("a-1")),
                }))],
            ),
            (
                "video_url: 'v.mp4'",
                vec![StreamEvent::Part(ContentPart::VideoUrl(VideoUrlPart {
                    video_url: media("v.mp4", None),
                }))],
            ),
            (
                r#"tool_call: {"id": "tc-1", "name": "Shell", "arguments": "{\"command\": \"ls\"}"}"#,
                vec![call("tc-1", "Shell", Some(r#"{"command": "ls"}"#))],
            ),
            (
                r#"tool_call: {"id": "tc-2", "function": {"name": "Read", "arguments": "{}"}}"#,
                vec![call("tc-2", "Read", Some("{}"))],
            ),
            (
                r#"tool_call: {"id": "tc-3", "name": "A", "function": {"name": "B", "extras": {"k": 1}}}"#,
                vec![StreamEvent::ToolCall(ToolCall {
                    extras,
                    ..ToolCall::new("tc-3", "A", None)
                })],
            ),
            (
                r#"tool_call: {"id": "tc-4", "name": "N", "extras": "ignored"}"#,
                vec![call("tc-4", "N", None)],
            ),
            (
                "tool_call: id=tc-5, name=Glob, arguments=\"{}\"",
                vec![call("tc-5", "Glob", Some("{}"))],
            ),
            (
                r#"tool_call_part: {"arguments_part": "{\"a\""}"#,
                vec![call_part(Some("{\"a\""))],
            ),
            ("tool_call_part: raw text", vec![call_part(Some("raw text"))]),
            ("tool_call_part: \"json\"", vec![call_part(Some("json"))]),
            ("tool_call_part:", vec![call_part(None)]),
            ("tool_call_part: null", vec![call_part(None)]),
            ("tool_call_part: \"\"", vec![call_part(None)]),
            (
                r#"tool_call_part: {"arguments_part": {"k": "é", "n": [1, 2.5]}}"#,
                vec![call_part(Some(r#"{"k":"\u00e9","n":[1,2.5]}"#))],
            ),
            ("tool_call_part: [1, \"x\"]", vec![call_part(Some(r#"[1,"x"]"#))]),
            ("id: only", vec![StreamEvent::MessageId("only".into())]),
        ];
        for (script, expected) in rows {
            let parsed = parse_script(script).unwrap_or_else(|e| panic!("{script:?}: {e}"));
            assert_eq!(parsed.events, expected, "script: {script:?}");
        }
        assert!(!parse_script("id: x\nusage: output=1").unwrap().has_parts());
        assert!(!parse_script("").unwrap().has_parts());
    }

    /// One row per error message, exact text and class.
    #[test]
    fn errors() {
        let rows: Vec<(&str, ChatError)> = vec![
            (
                "bad line without colon",
                ChatError::provider("Invalid echo DSL at line 1: 'bad line without colon'"),
            ),
            (
                "text: ok\n  it's here  ",
                ChatError::provider("Invalid echo DSL at line 2: \"  it's here  \""),
            ),
            (
                "bogus: value",
                ChatError::provider("Unknown echo DSL kind 'bogus' at line 1: 'bogus: value'"),
            ),
            ("error: 429", ChatError::status(429, "Simulated 429 error")),
            (
                "error: 401 Token expired",
                ChatError::status(401, "Token expired"),
            ),
            (
                "error: connection",
                ChatError::Connection {
                    message: "Simulated connection error".into(),
                },
            ),
            (
                "error: Connection reset by peer",
                ChatError::Connection {
                    message: "reset by peer".into(),
                },
            ),
            (
                "error: timeout",
                ChatError::Timeout {
                    message: "Simulated timeout error".into(),
                },
            ),
            (
                "error: timeout slow",
                ChatError::Timeout {
                    message: "slow".into(),
                },
            ),
            (
                "error:",
                ChatError::provider("Empty error payload at line 1: 'error:'"),
            ),
            (
                "error: bogus",
                ChatError::provider(
                    "Invalid error spec at line 1: expected status code or \
                     'connection'/'timeout', got 'bogus'",
                ),
            ),
            (
                "text: streamed? no\nerror: 503",
                ChatError::status(503, "Simulated 503 error"),
            ),
            (
                "usage: output=abc",
                ChatError::provider("Usage field 'output' must be an integer, got 'abc'"),
            ),
            (
                "usage: output=null",
                ChatError::provider("Usage field 'output' must be an integer, got None"),
            ),
            (
                "usage: output",
                ChatError::provider("Invalid token 'output' in usage payload."),
            ),
            ("usage:", ChatError::provider("usage payload cannot be empty.")),
            (
                "usage: [1, 2]",
                ChatError::provider("usage payload must be an object, got [1, 2]"),
            ),
            (
                "image_url: {\"id\": \"x\"}",
                ChatError::provider("image_url requires a url field, got {'id': 'x'}"),
            ),
            (
                "image_url: {\"url\": \"u\", \"id\": 3}",
                ChatError::provider("image_url id must be a string when provided."),
            ),
            (
                "video_url:",
                ChatError::provider("video_url expects url string or object, got None"),
            ),
            (
                "tool_call: {\"id\": \"x\"}",
                ChatError::provider(
                    "tool_call requires string id and name at line 1: 'tool_call: {\"id\": \"x\"}'",
                ),
            ),
            (
                "tool_call: {\"id\": \"x\", \"name\": \"N\", \"arguments\": {\"a\": 1}}",
                ChatError::provider("tool_call.arguments must be a string at line 1, got dict"),
            ),
            (
                "tool_call:",
                ChatError::provider("tool_call payload cannot be empty."),
            ),
            (
                "tool_call: noequals",
                ChatError::provider("Invalid token 'noequals' in tool_call payload."),
            ),
            (
                "tool_call_part: 42",
                ChatError::provider(
                    "1 validation error for ToolCallPart\narguments_part\n  Input should be a \
                     valid string [type=string_type, input_value=42, input_type=int]\n    For \
                     further information visit https://errors.pydantic.dev/2.12/v/string_type",
                ),
            ),
        ];
        for (script, expected) in rows {
            let err = parse_script(script).expect_err(script);
            assert_eq!(err, expected, "script: {script:?}");
        }
    }
}
