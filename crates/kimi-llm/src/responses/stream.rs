//! The Responses API's event stream decoded into [`StreamEvent`]s.
//!
//! Reference: kosong's `OpenAIResponsesStreamedMessage`:
//! - `response.output_text.delta` -> text;
//! - `response.reasoning_summary_text.delta` -> think text; `response.output_item.done` of a
//!   `reasoning` item -> a think part with empty text carrying the item's `encrypted_content` (the
//!   loop joins it to the summary before it);
//! - `response.output_item.added` of a `function_call` item announces a call by its `call_id`, and
//!   `response.function_call_arguments.delta` streams its arguments (routed by `output_index`);
//! - `response.completed` carries the usage (`input_tokens_details.cached_tokens` -> cache reads);
//! - the message id is the id of the latest output item, as in the reference.
//!
//! How a stream may end, beyond the reference (which keeps whatever arrived): `response.completed` or
//! `response.incomplete` (a budget ran out) finish the answer; `response.failed` and `error` events are
//! errors (`Error: <message>`; a server error or rate limit as a retryable status); a body that ends
//! without any of these after some events was cut off (retryable), an empty one is an empty answer.

use std::collections::HashMap;

use kimi_wire::message::{ContentPart, ThinkPart, TokenUsage};
use serde::Deserialize;
use serde_json::Value;

use crate::assemble::{Assembler, ToolCallDelta};
use crate::sse::{Decode, Flow, ended, malformed};
use crate::tool_names::ToolNames;
use crate::{ChatError, StreamEvent};

#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
enum Event {
    #[serde(rename = "response.output_text.delta")]
    TextDelta { delta: String },
    #[serde(rename = "response.reasoning_summary_text.delta")]
    SummaryDelta { delta: String },
    #[serde(rename = "response.output_item.added")]
    ItemAdded {
        #[serde(default)]
        output_index: Option<u64>,
        item: Item,
    },
    #[serde(rename = "response.output_item.done")]
    ItemDone {
        #[serde(default)]
        output_index: Option<u64>,
        item: Item,
    },
    #[serde(rename = "response.function_call_arguments.delta")]
    ArgumentsDelta {
        #[serde(default)]
        output_index: Option<u64>,
        delta: String,
    },
    #[serde(rename = "response.completed", alias = "response.incomplete")]
    Finished { response: Response },
    #[serde(rename = "response.failed")]
    Failed { response: Response },
    #[serde(rename = "error")]
    Error {
        #[serde(default)]
        code: Option<String>,
        #[serde(default)]
        message: Option<String>,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct Item {
    #[serde(default)]
    id: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    call_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
    #[serde(default)]
    encrypted_content: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Response {
    /// `completed` or `incomplete` for a finished answer.
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<ResponseError>,
}

#[derive(Debug, Deserialize)]
struct ResponseError {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    input_tokens_details: Option<InputDetails>,
}

#[derive(Debug, Deserialize)]
struct InputDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl Usage {
    fn to_token_usage(&self) -> TokenUsage {
        let cached = self
            .input_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .unwrap_or(0)
            .min(self.input_tokens);
        TokenUsage {
            input_other: self.input_tokens - cached,
            output: self.output_tokens,
            input_cache_read: cached,
            input_cache_creation: 0,
        }
    }
}

/// Decoding state for one answer.
#[derive(Debug)]
pub(crate) struct Decoder {
    names: ToolNames,
    assembler: Assembler,
    message_id: Option<String>,
    /// Argument bytes received per function call (by output index), so that a gateway that only sends
    /// the whole arguments with the finished item still delivers them.
    arguments_seen: HashMap<u64, usize>,
    saw_event: bool,
}

impl Decoder {
    pub(crate) fn new(names: ToolNames) -> Self {
        Self {
            names,
            assembler: Assembler::default(),
            message_id: None,
            arguments_seen: HashMap::new(),
            saw_event: false,
        }
    }

    fn note_item_id(&mut self, item: &Item, out: &mut Vec<StreamEvent>) {
        if let Some(id) = item.id.as_deref().filter(|id| !id.is_empty())
            && self.message_id.as_deref() != Some(id)
        {
            self.message_id = Some(id.to_owned());
            out.push(StreamEvent::MessageId(id.to_owned()));
        }
    }

    fn arguments(
        &mut self,
        index: Option<u64>,
        piece: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ChatError> {
        if let Some(index) = index {
            *self.arguments_seen.entry(index).or_default() += piece.len();
        }
        self.assembler.push(
            ToolCallDelta {
                index,
                arguments: Some(piece),
                ..ToolCallDelta::default()
            },
            out,
        )
    }

    fn on_item_added(
        &mut self,
        index: Option<u64>,
        item: Item,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ChatError> {
        self.note_item_id(&item, out);
        if item.kind != "function_call" {
            return Ok(());
        }
        let id = item
            .call_id
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let name = item.name.as_deref().map(|n| self.names.ours(n).to_owned());
        let arguments = item.arguments.unwrap_or_default();
        if let Some(index) = index {
            self.arguments_seen.insert(index, arguments.len());
        }
        self.assembler.push(
            ToolCallDelta {
                index,
                id: Some(&id),
                name: name.as_deref(),
                arguments: Some(&arguments),
            },
            out,
        )
    }

    fn on_item_done(
        &mut self,
        index: Option<u64>,
        item: Item,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ChatError> {
        self.note_item_id(&item, out);
        match item.kind.as_str() {
            "reasoning" => {
                if let Some(encrypted) = item.encrypted_content {
                    out.push(StreamEvent::Part(ContentPart::Think(ThinkPart {
                        think: String::new(),
                        encrypted: Some(encrypted),
                    })));
                }
            }
            "function_call" => {
                let seen = index
                    .and_then(|i| self.arguments_seen.get(&i).copied())
                    .unwrap_or(0);
                if let Some(rest) = item.arguments.as_deref().and_then(|a| a.get(seen..))
                    && !rest.is_empty()
                {
                    self.arguments(index, rest, out)?;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl Decode for Decoder {
    fn on_event(&mut self, _event: &str, data: &str, out: &mut Vec<StreamEvent>) -> Result<Flow, ChatError> {
        let data = data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(Flow::More);
        }
        let value: Value = serde_json::from_str(data).map_err(|e| malformed(&e, data))?;
        let event: Event = serde_json::from_value(value).map_err(|e| {
            ChatError::provider(format!("Error: unexpected event in the response stream ({e})"))
        })?;
        self.saw_event = true;
        match event {
            Event::TextDelta { delta } => out.push(StreamEvent::Part(ContentPart::text(delta))),
            Event::SummaryDelta { delta } => out.push(StreamEvent::Part(ContentPart::think(delta))),
            Event::ItemAdded { output_index, item } => self.on_item_added(output_index, item, out)?,
            Event::ItemDone { output_index, item } => self.on_item_done(output_index, item, out)?,
            Event::ArgumentsDelta { output_index, delta } => self.arguments(output_index, &delta, out)?,
            Event::Finished { response } => {
                self.assembler.finish();
                if let Some(usage) = &response.usage {
                    out.push(StreamEvent::Usage(usage.to_token_usage()));
                }
                if let Some(status) = response.status.filter(|s| !s.is_empty()) {
                    out.push(StreamEvent::Finish(status));
                }
                return Ok(Flow::Done);
            }
            Event::Failed { response } => {
                let error = response.error.unwrap_or(ResponseError {
                    code: None,
                    message: None,
                });
                return Err(stream_error(error.code.as_deref(), error.message.as_deref()));
            }
            Event::Error { code, message } => return Err(stream_error(code.as_deref(), message.as_deref())),
            Event::Other => {}
        }
        Ok(Flow::More)
    }

    /// Every complete answer ends with `response.completed` or `response.incomplete` (handled above).
    fn on_eof(&mut self, _out: &mut Vec<StreamEvent>) -> Result<(), ChatError> {
        ended(self.saw_event, false)
    }
}

/// A failed response or an `error` event: `Error: <message>`, as a retryable status when the API says
/// the fault was its own or a rate limit.
fn stream_error(code: Option<&str>, message: Option<&str>) -> ChatError {
    let message = format!(
        "Error: {}",
        message
            .filter(|m| !m.is_empty())
            .unwrap_or("An error occurred during streaming")
    );
    tracing::warn!(code, %message, "error in the response stream");
    match code {
        Some("server_error") => ChatError::status(500, message),
        Some("rate_limit_exceeded") => ChatError::status(429, message),
        _ => ChatError::provider(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::{replay, truncated};
    use kimi_wire::message::{ToolCall, ToolCallPart};
    use pretty_assertions::assert_eq;

    fn decode(events: &[&str]) -> (Vec<StreamEvent>, Result<(), ChatError>) {
        let pairs: Vec<(&str, &str)> = events.iter().map(|d| ("", *d)).collect();
        replay(&mut Decoder::new(ToolNames::default()), &pairs)
    }

    /// Reasoning with a summary, a function call, and the completion. Where this comes from: written by
    /// hand after the event objects of OpenAI's Responses streaming reference
    /// (https://platform.openai.com/docs/api-reference/responses-streaming), trimmed to the fields a
    /// decoder reads plus `sequence_number`, with our own ids, texts and usage; no live API was called.
    const REASONING_TOOL_TURN: &[&str] = &[
        r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[]}}"#,
        r#"{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}"#,
        r#"{"type":"response.reasoning_summary_part.added","sequence_number":2,"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}"#,
        r#"{"type":"response.reasoning_summary_text.delta","sequence_number":3,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"Need the file."}"#,
        r#"{"type":"response.output_item.done","sequence_number":4,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Need the file."}],"encrypted_content":"gAAAA-enc"}}"#,
        r#"{"type":"response.output_item.added","sequence_number":5,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_abc","name":"ReadFile"}}"#,
        r#"{"type":"response.function_call_arguments.delta","sequence_number":6,"item_id":"fc_1","output_index":1,"delta":"{\"path\":"}"#,
        r#"{"type":"response.function_call_arguments.delta","sequence_number":7,"item_id":"fc_1","output_index":1,"delta":"\"a.txt\"}"}"#,
        r#"{"type":"response.output_item.done","sequence_number":8,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"path\":\"a.txt\"}","call_id":"call_abc","name":"ReadFile"}}"#,
        r#"{"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","status":"completed","usage":{"input_tokens":120,"input_tokens_details":{"cached_tokens":100},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":20},"total_tokens":150}}}"#,
    ];

    #[test]
    fn reasoning_and_a_function_call() {
        let (out, end) = decode(REASONING_TOOL_TURN);
        assert_eq!(end, Ok(()));
        assert_eq!(
            out,
            vec![
                StreamEvent::MessageId("rs_1".into()),
                StreamEvent::Part(ContentPart::think("Need the file.")),
                StreamEvent::Part(ContentPart::Think(ThinkPart {
                    think: String::new(),
                    encrypted: Some("gAAAA-enc".into())
                })),
                StreamEvent::MessageId("fc_1".into()),
                StreamEvent::ToolCall(ToolCall::new("call_abc", "ReadFile", Some(String::new()))),
                StreamEvent::ToolCallPart(ToolCallPart {
                    arguments_part: Some("{\"path\":".into())
                }),
                StreamEvent::ToolCallPart(ToolCallPart {
                    arguments_part: Some("\"a.txt\"}".into())
                }),
                StreamEvent::Usage(TokenUsage {
                    input_other: 20,
                    output: 30,
                    input_cache_read: 100,
                    input_cache_creation: 0
                }),
                StreamEvent::Finish("completed".into()),
            ]
        );
    }

    #[test]
    fn arguments_sent_only_with_the_finished_item_are_delivered() {
        let (out, end) = decode(&[
            REASONING_TOOL_TURN[5],
            REASONING_TOOL_TURN[8],
            REASONING_TOOL_TURN[9],
        ]);
        assert_eq!(end, Ok(()));
        assert_eq!(
            out[2],
            StreamEvent::ToolCallPart(ToolCallPart {
                arguments_part: Some("{\"path\":\"a.txt\"}".into())
            })
        );
    }

    #[test]
    fn endings_and_errors() {
        assert_eq!(decode(&REASONING_TOOL_TURN[..7]).1, Err(truncated()));
        assert_eq!(decode(&[]), (vec![], Ok(())));
        let failed = r#"{"type":"response.failed","response":{"id":"r","status":"failed","error":{"code":"server_error","message":"The model failed."}}}"#;
        let error = decode(&[failed]).1.unwrap_err();
        assert_eq!(error, ChatError::status(500, "Error: The model failed."));
        let event = r#"{"type":"error","code":"invalid_prompt","message":"Bad input.","param":null}"#;
        assert_eq!(decode(&[event]).1, Err(ChatError::provider("Error: Bad input.")));
        let incomplete = r#"{"type":"response.incomplete","response":{"id":"r","status":"incomplete","usage":{"input_tokens":5,"output_tokens":7}}}"#;
        let (out, end) = decode(&[
            r#"{"type":"response.output_text.delta","delta":"Hal"}"#,
            incomplete,
        ]);
        assert_eq!(end, Ok(()));
        assert_eq!(out.len(), 3);
        assert_eq!(out[2], StreamEvent::Finish("incomplete".into()));
    }
}
