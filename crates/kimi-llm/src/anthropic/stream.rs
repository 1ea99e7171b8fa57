//! The Messages API's event stream decoded into [`StreamEvent`]s.
//!
//! Events (the `type` of each event's data): `message_start` (id and the input usage),
//! `content_block_start` / `content_block_delta` / `content_block_stop` for each text, thinking,
//! redacted-thinking or tool-use block, `message_delta` (stop reason, final usage), `message_stop`,
//! `ping`, and `error`. Reference: kosong's `AnthropicStreamedMessage`:
//! - a thinking block streams as think parts and ends with its signature as a think part with empty
//!   text and `encrypted` set (the loop joins them into one signed part); a redacted block is a think
//!   part with empty text and its data, marked as redacted (see [`super::REDACTED_THINKING`]), as
//!   `encrypted` (the reference stores the bare data, and so sends it back as a signature);
//! - a tool-use block is announced with its id and name, its input arrives as JSON fragments;
//! - usage: `input_tokens` -> `input_other`, `cache_read_input_tokens` -> `input_cache_read`,
//!   `cache_creation_input_tokens` -> `input_cache_creation`, updated by `message_delta`.
//!
//! How a stream may end, beyond the reference (which keeps whatever arrived):
//! - `message_stop`, or the body ending after a `message_delta` with a stop reason: complete;
//! - nothing at all: complete and empty (the loop reports the empty answer);
//! - anything else: cut off, a retryable [`ChatError::Connection`];
//! - an `error` event: an `APIStatusError` with the reference's text (the Python repr of the event),
//!   whose status is the HTTP status of the error type (`overloaded_error` 529, `rate_limit_error` 429,
//!   `api_error` 500, ...) so the loop retries what the API would have answered with a retryable
//!   status; an unknown type keeps the reference's status 200 (not retried).

use kimi_wire::message::{ContentPart, ThinkPart, TokenUsage};
use serde::Deserialize;
use serde_json::Value;

use crate::assemble::{Assembler, ToolCallDelta};
use crate::py::repr_json;
use crate::sse::{Decode, Flow, ended, malformed};
use crate::tool_names::ToolNames;
use crate::{ChatError, StreamEvent};

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: MessageStart,
    },
    ContentBlockStart {
        index: u64,
        content_block: Block,
    },
    ContentBlockDelta {
        index: u64,
        delta: Delta,
    },
    ContentBlockStop {},
    MessageDelta {
        #[serde(default)]
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: Option<Usage>,
    },
    MessageStop {},
    Ping {},
    Error {},
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Deserialize)]
struct MessageStart {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Default, Deserialize)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        #[serde(default)]
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
    },
    RedactedThinking {
        #[serde(default)]
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Option<Value>,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Delta {
    #[serde(rename = "text_delta")]
    Text { text: String },
    #[serde(rename = "thinking_delta")]
    Thinking { thinking: String },
    #[serde(rename = "signature_delta")]
    Signature { signature: String },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: String },
    #[serde(other)]
    Other,
}

/// Usage as `message_start` and `message_delta` report it; absent fields keep the earlier value.
#[derive(Debug, Default, Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

/// Decoding state for one answer.
#[derive(Debug)]
pub(crate) struct Decoder {
    names: ToolNames,
    assembler: Assembler,
    usage: TokenUsage,
    saw_event: bool,
    /// The message's `stop_reason`, once one was given.
    stop_reason: Option<String>,
}

impl Decoder {
    pub(crate) fn new(names: ToolNames) -> Self {
        Self {
            names,
            assembler: Assembler::default(),
            usage: TokenUsage::default(),
            saw_event: false,
            stop_reason: None,
        }
    }

    fn update_usage(&mut self, usage: &Usage) {
        let u = &mut self.usage;
        for (field, value) in [
            (&mut u.input_other, usage.input_tokens),
            (&mut u.output, usage.output_tokens),
            (&mut u.input_cache_read, usage.cache_read_input_tokens),
            (&mut u.input_cache_creation, usage.cache_creation_input_tokens),
        ] {
            if let Some(value) = value {
                *field = value;
            }
        }
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        self.assembler.finish();
        out.push(StreamEvent::Usage(self.usage));
        if let Some(reason) = self.stop_reason.take() {
            out.push(StreamEvent::Finish(reason));
        }
    }

    fn on_block_start(
        &mut self,
        index: u64,
        block: Block,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ChatError> {
        match block {
            Block::Text { text } if !text.is_empty() => out.push(StreamEvent::Part(ContentPart::text(text))),
            Block::Thinking { thinking } if !thinking.is_empty() => {
                out.push(StreamEvent::Part(ContentPart::think(thinking)));
            }
            Block::RedactedThinking { data } => out.push(signature(super::redacted_thinking(&data))),
            Block::ToolUse { id, name, input } => {
                // The input streams as JSON fragments after an empty `{}`; a gateway that sends it whole
                // in the start event is taken at its word.
                let initial = match input {
                    Some(Value::Object(map)) if !map.is_empty() => Value::Object(map).to_string(),
                    _ => String::new(),
                };
                let name = self.names.ours(&name).to_owned();
                self.assembler.push(
                    ToolCallDelta {
                        index: Some(index),
                        id: Some(&id),
                        name: Some(&name),
                        arguments: Some(&initial),
                    },
                    out,
                )?;
            }
            Block::Text { .. } | Block::Thinking { .. } | Block::Other => {}
        }
        Ok(())
    }

    fn on_delta(&mut self, index: u64, delta: Delta, out: &mut Vec<StreamEvent>) -> Result<(), ChatError> {
        match delta {
            Delta::Text { text } => out.push(StreamEvent::Part(ContentPart::text(text))),
            Delta::Thinking { thinking } => out.push(StreamEvent::Part(ContentPart::think(thinking))),
            Delta::Signature { signature: sig } => out.push(signature(sig)),
            Delta::InputJson { partial_json } => self.assembler.push(
                ToolCallDelta {
                    index: Some(index),
                    arguments: Some(&partial_json),
                    ..ToolCallDelta::default()
                },
                out,
            )?,
            Delta::Other => {}
        }
        Ok(())
    }
}

/// A think part that only carries a signature (or a redacted block's data).
fn signature(encrypted: String) -> StreamEvent {
    StreamEvent::Part(ContentPart::Think(ThinkPart {
        think: String::new(),
        encrypted: Some(encrypted),
    }))
}

impl Decode for Decoder {
    fn on_event(&mut self, event: &str, data: &str, out: &mut Vec<StreamEvent>) -> Result<Flow, ChatError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(Flow::More);
        }
        let value: Value = serde_json::from_str(data).map_err(|e| malformed(&e, data))?;
        if event == "error" || value["type"] == "error" {
            return Err(stream_error(&value));
        }
        let parsed: Event = serde_json::from_value(value).map_err(|e| {
            ChatError::provider(format!("Anthropic error: unexpected event in the stream ({e})"))
        })?;
        self.saw_event = true;
        match parsed {
            Event::MessageStart { message } => {
                if let Some(id) = message.id.filter(|id| !id.is_empty()) {
                    out.push(StreamEvent::MessageId(id));
                }
                if let Some(usage) = &message.usage {
                    self.update_usage(usage);
                }
            }
            Event::ContentBlockStart { index, content_block } => {
                self.on_block_start(index, content_block, out)?
            }
            Event::ContentBlockDelta { index, delta } => self.on_delta(index, delta, out)?,
            Event::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    self.stop_reason = Some(reason);
                }
                if let Some(usage) = &usage {
                    self.update_usage(usage);
                }
            }
            Event::MessageStop {} => {
                self.finish(out);
                return Ok(Flow::Done);
            }
            Event::ContentBlockStop {} | Event::Ping {} | Event::Error {} | Event::Unknown => {}
        }
        Ok(Flow::More)
    }

    fn on_eof(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ChatError> {
        ended(self.saw_event, self.stop_reason.is_some())?;
        if self.saw_event {
            self.finish(out);
        }
        Ok(())
    }
}

/// An `error` event: the Anthropic SDK raises it as an `APIStatusError` whose text is the Python repr
/// of the event's data.
fn stream_error(value: &Value) -> ChatError {
    let status = match value["error"]["type"].as_str() {
        Some("invalid_request_error") => 400,
        Some("authentication_error") => 401,
        Some("permission_error") => 403,
        Some("not_found_error") => 404,
        Some("request_too_large") => 413,
        Some("rate_limit_error") => 429,
        Some("api_error") => 500,
        Some("timeout_error") => 504,
        Some("overloaded_error") => 529,
        _ => 200,
    };
    tracing::warn!(body = %value, status, "error event in the response stream");
    ChatError::status(status, repr_json(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::{replay, truncated};
    use kimi_wire::message::{ToolCall, ToolCallPart};
    use pretty_assertions::assert_eq;

    fn decode(events: &[(&str, &str)]) -> (Vec<StreamEvent>, Result<(), ChatError>) {
        replay(&mut Decoder::new(ToolNames::default()), events)
    }

    fn think(text: &str) -> StreamEvent {
        StreamEvent::Part(ContentPart::think(text))
    }

    /// A thinking block, a text block and a tool call, as the API streams them. Where this comes from:
    /// written by hand, event for event and field for field, after the example streams of Anthropic's
    /// "Streaming messages" page (https://docs.anthropic.com/en/api/messages-streaming: the extended
    /// thinking and tool-use examples, `ping` included), with our own ids, texts, signature and usage;
    /// no live API was called (no key here). The black-box mock (tests/suite/providers_more.rs) serves
    /// the same shape over HTTP.
    const THINKING_TOOL_TURN: &[(&str, &str)] = &[
        (
            "message_start",
            r#"{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":2000,"cache_read_input_tokens":3000,"output_tokens":1}}}"#,
        ),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
        ),
        ("ping", r#"{"type": "ping"}"#),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Read it"}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCkYIB"}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Reading."}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":1}"#),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01","name":"ReadFile","input":{}}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"a.txt\"}"}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":2}"#),
        (
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}"#,
        ),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ];

    #[test]
    fn thinking_text_and_a_tool_call() {
        let (out, end) = decode(THINKING_TOOL_TURN);
        assert_eq!(end, Ok(()));
        assert_eq!(
            out,
            vec![
                StreamEvent::MessageId("msg_01".into()),
                think("Read it"),
                signature("EqQBCkYIB".into()),
                StreamEvent::Part(ContentPart::text("Reading.")),
                StreamEvent::ToolCall(ToolCall::new("toolu_01", "ReadFile", Some(String::new()))),
                StreamEvent::ToolCallPart(ToolCallPart {
                    arguments_part: Some("{\"path\": \"a.txt\"}".into())
                }),
                StreamEvent::Usage(TokenUsage {
                    input_other: 12,
                    output: 89,
                    input_cache_read: 3000,
                    input_cache_creation: 2000,
                }),
                StreamEvent::Finish("tool_use".into()),
            ]
        );
    }

    #[test]
    fn cut_off_streams_are_retryable_and_an_empty_body_is_empty() {
        let (_, end) = decode(&THINKING_TOOL_TURN[..8]);
        assert_eq!(end, Err(truncated()));
        assert_eq!(decode(&[]), (vec![], Ok(())));
        // A stop reason without `message_stop` (some gateways end there) is complete.
        let (out, end) = decode(&THINKING_TOOL_TURN[..14]);
        assert_eq!(end, Ok(()));
        assert!(
            matches!(&out[out.len() - 2..], [StreamEvent::Usage(_), StreamEvent::Finish(reason)] if reason == "tool_use")
        );
    }

    #[test]
    fn error_events_carry_the_status_of_their_type() {
        let overloaded = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let (_, end) = decode(&[THINKING_TOOL_TURN[0], ("error", overloaded)]);
        let error = end.unwrap_err();
        assert_eq!(error.status_code(), Some(529));
        assert!(error.is_retryable());
        assert_eq!(
            error.to_string(),
            "{'type': 'error', 'error': {'type': 'overloaded_error', 'message': 'Overloaded'}}"
        );
        let odd = r#"{"type":"error","error":{"type":"brand_new_error","message":"?"}}"#;
        let (_, end) = decode(&[("error", odd)]);
        assert_eq!(end.unwrap_err().status_code(), Some(200));
    }

    #[test]
    fn redacted_thinking_and_renamed_tools() {
        let names = ToolNames::new(&[crate::ToolSpec {
            name: "mcp:x".into(),
            description: String::new(),
            parameters: serde_json::json!({}),
        }]);
        let mut decoder = Decoder::new(names);
        let (out, end) = replay(
            &mut decoder,
            &[
                (
                    "",
                    r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1,"output_tokens":0}}}"#,
                ),
                (
                    "",
                    r#"{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"opaque"}}"#,
                ),
                (
                    "",
                    r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"mcp_x","input":{"k":1}}}"#,
                ),
                (
                    "",
                    r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}"#,
                ),
                ("", r#"{"type":"message_stop"}"#),
            ],
        );
        assert_eq!(end, Ok(()));
        // The data is kept whole, marked so that it goes back as a redacted block.
        assert_eq!(out[1], signature("redacted_thinking:opaque".into()));
        assert_eq!(
            out[2],
            StreamEvent::ToolCall(ToolCall::new("t", "mcp:x", Some("{\"k\":1}".into())))
        );
    }
}
