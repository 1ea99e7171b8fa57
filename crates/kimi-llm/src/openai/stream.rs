//! Server-sent chunks decoded into [`StreamEvent`]s.
//!
//! The chunk types are deliberately loose: every field is optional, unknown
//! fields are ignored, `finish_reason` is any string, and usage is read from
//! the chunk (OpenAI) or from `choices[0]` (Kimi), with cached tokens from
//! `prompt_tokens_details.cached_tokens` or Kimi's top-level `cached_tokens`.
//!
//! How a stream may end:
//! - `data: [DONE]`: complete.
//! - The body ends without `[DONE]` after a choice gave a `finish_reason`:
//!   complete too; some gateways never send `[DONE]`.
//! - The body ends before any chunk arrived: complete and empty; the loop
//!   reports the empty answer (`APIEmptyResponseError`), as the reference does.
//! - The body ends without either after some chunks (cut off, possibly in the
//!   middle of a JSON line): [`ChatError::Connection`], retryable. The reference would keep
//!   whatever arrived as a finished message; we prefer a retry to acting on
//!   half an answer.
//! - A chunk with an `error` member, or an `event: error`: a plain provider
//!   error `Error: <message>`, as the reference reports it (not retried).
//! - A chunk that is not JSON: [`ChatError::Connection`] (a mangled stream).

use kimi_wire::message::{ContentPart, TokenUsage};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::assemble::{Assembler, ToolCallDelta};
use crate::py::truthy;
use crate::sse::{Decode, Flow, ended, malformed};
use crate::tool_names::ToolNames;
use crate::{ChatError, StreamEvent};

#[derive(Debug, Default, Deserialize)]
struct Chunk {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Default, Deserialize)]
struct Choice {
    /// Streaming chunks.
    #[serde(default)]
    delta: Option<Delta>,
    /// Whole (non-streamed) answers.
    #[serde(default)]
    message: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<Value>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallChunk>>,
    /// Everything else, among it the reasoning text under its key.
    #[serde(flatten)]
    rest: Map<String, Value>,
}

#[derive(Debug, Default, Deserialize)]
struct ToolCallChunk {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionChunk>,
}

#[derive(Debug, Default, Deserialize)]
struct FunctionChunk {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    /// Kimi's place for cache hits.
    #[serde(default)]
    cached_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Debug, Default, Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl Usage {
    /// Our usage, or `None` for an empty object (`usage: {}`).
    fn to_token_usage(&self) -> Option<TokenUsage> {
        if self.prompt_tokens.is_none() && self.completion_tokens.is_none() {
            return None;
        }
        let prompt = self.prompt_tokens.unwrap_or(0);
        let cached = self
            .cached_tokens
            .or_else(|| self.prompt_tokens_details.as_ref().and_then(|d| d.cached_tokens))
            .unwrap_or(0)
            .min(prompt);
        Some(TokenUsage {
            input_other: prompt - cached,
            output: self.completion_tokens.unwrap_or(0),
            input_cache_read: cached,
            input_cache_creation: 0,
        })
    }
}

/// Decoding state for one answer.
#[derive(Debug)]
pub(crate) struct Decoder {
    reasoning_key: Option<String>,
    /// Kimi keeps empty reasoning strings as think parts; others drop them.
    keep_empty_think: bool,
    /// Tool names the server knows under another name, mapped back to ours.
    names: ToolNames,
    assembler: Assembler,
    message_id: Option<String>,
    usage: Option<TokenUsage>,
    /// The choice's `finish_reason`, once one was given.
    finish_reason: Option<String>,
    /// Whether any chunk arrived, so an empty body is told apart from a cut one.
    saw_chunk: bool,
}

impl Decoder {
    pub(crate) fn new(reasoning_key: Option<String>, keep_empty_think: bool, names: ToolNames) -> Self {
        Self {
            reasoning_key,
            keep_empty_think,
            names,
            assembler: Assembler::default(),
            message_id: None,
            usage: None,
            finish_reason: None,
            saw_chunk: false,
        }
    }

    /// Decodes a whole, non-streamed answer.
    pub(crate) fn whole(mut self, text: &str) -> Result<Vec<StreamEvent>, ChatError> {
        let mut out = Vec::new();
        let value: Value = serde_json::from_str(text).map_err(|e| ChatError::Connection {
            message: format!("Connection error: malformed response ({e})."),
        })?;
        if let Some(error) = stream_error("", &value) {
            return Err(error);
        }
        let mut chunk: Chunk = serde_json::from_value(value)
            .map_err(|e| ChatError::provider(format!("Error: unexpected response ({e})")))?;
        if let Some(choice) = chunk.choices.as_mut().and_then(|c| c.first_mut())
            && choice.delta.is_none()
        {
            choice.delta = choice.message.take();
        }
        self.on_chunk(chunk, &mut out)?;
        self.finish(&mut out);
        Ok(out)
    }

    fn on_chunk(&mut self, chunk: Chunk, out: &mut Vec<StreamEvent>) -> Result<(), ChatError> {
        if let Some(id) = chunk.id.filter(|id| !id.is_empty())
            && self.message_id.as_deref() != Some(id.as_str())
        {
            out.push(StreamEvent::MessageId(id.clone()));
            self.message_id = Some(id);
        }
        if let Some(usage) = chunk.usage.as_ref().and_then(Usage::to_token_usage) {
            self.usage = Some(usage);
        }
        let Some(choice) = chunk.choices.and_then(|c| c.into_iter().next()) else {
            return Ok(());
        };
        if let Some(usage) = choice.usage.as_ref().and_then(Usage::to_token_usage) {
            self.usage = Some(usage);
        }
        if let Some(Value::String(reason)) = &choice.finish_reason
            && !reason.is_empty()
        {
            self.finish_reason = Some(reason.clone());
        }
        let Some(delta) = choice.delta else {
            return Ok(());
        };
        if let Some(key) = &self.reasoning_key {
            // Reference (Kimi): an empty string is still a think part, so that
            // "reasoned but said nothing" round-trips to the server.
            if let Some(Value::String(think)) = delta.rest.get(key)
                && (!think.is_empty() || self.keep_empty_think)
            {
                out.push(StreamEvent::Part(ContentPart::think(think.clone())));
            }
        }
        if let Some(Value::String(text)) = delta.content
            && !text.is_empty()
        {
            out.push(StreamEvent::Part(ContentPart::text(text)));
        }
        for call in delta.tool_calls.unwrap_or_default() {
            let Some(function) = &call.function else {
                continue;
            };
            let name = function.name.as_deref().map(|n| self.names.ours(n));
            self.assembler.push(
                ToolCallDelta {
                    index: call.index,
                    id: call.id.as_deref(),
                    name,
                    arguments: function.arguments.as_deref(),
                },
                out,
            )?;
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        self.assembler.finish();
        if let Some(usage) = self.usage.take() {
            out.push(StreamEvent::Usage(usage));
        }
        if let Some(reason) = self.finish_reason.take() {
            out.push(StreamEvent::Finish(reason));
        }
    }
}

impl Decode for Decoder {
    fn on_event(&mut self, event: &str, data: &str, out: &mut Vec<StreamEvent>) -> Result<Flow, ChatError> {
        let data = data.trim();
        if data.starts_with("[DONE]") {
            self.finish(out);
            return Ok(Flow::Done);
        }
        if data.is_empty() {
            return Ok(Flow::More);
        }
        self.saw_chunk = true;
        let value: Value = serde_json::from_str(data).map_err(|e| malformed(&e, data))?;
        if let Some(error) = stream_error(event, &value) {
            return Err(error);
        }
        let chunk: Chunk = serde_json::from_value(value).map_err(|e| {
            ChatError::provider(format!("Error: unexpected chunk in the response stream ({e})"))
        })?;
        self.on_chunk(chunk, out)?;
        Ok(Flow::More)
    }

    /// Complete if a finish reason was seen or nothing came at all, truncated otherwise.
    fn on_eof(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ChatError> {
        ended(self.saw_chunk, self.finish_reason.is_some())?;
        self.finish(out);
        Ok(())
    }
}

/// The error a chunk reports, as kosong surfaces it: `Error: <message>`.
fn stream_error(event: &str, value: &Value) -> Option<ChatError> {
    let Value::Object(map) = value else {
        return (event == "error").then(|| ChatError::provider("Error: An error occurred during streaming"));
    };
    let error = map.get("error").filter(|e| truthy(e));
    if error.is_none() && event != "error" {
        return None;
    }
    let message = error
        .and_then(|e| e.get("message"))
        .or_else(|| map.get("message"))
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .unwrap_or("An error occurred during streaming");
    tracing::warn!(body = %value, "error event in the response stream");
    Some(ChatError::provider(format!("Error: {message}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::TRUNCATED;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn decode(chunks: &[Value]) -> (Vec<StreamEvent>, Result<(), ChatError>) {
        let mut decoder = Decoder::new(Some("reasoning_content".into()), true, ToolNames::default());
        let mut out = Vec::new();
        for chunk in chunks {
            if let Err(e) = decoder.on_event("", &chunk.to_string(), &mut out) {
                return (out, Err(e));
            }
        }
        let end = decoder.on_eof(&mut out);
        (out, end)
    }

    #[test]
    fn usage_in_choice_with_top_level_cached_tokens() {
        let (out, end) = decode(&[
            json!({"id": "c1", "choices": [{"index": 0, "delta": {"content": "hi"}}]}),
            json!({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop",
                "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12, "cached_tokens": 4}}]}),
        ]);
        assert_eq!(end, Ok(()));
        assert_eq!(
            out,
            vec![
                StreamEvent::MessageId("c1".into()),
                StreamEvent::Part(ContentPart::text("hi")),
                StreamEvent::Usage(TokenUsage {
                    input_other: 6,
                    output: 2,
                    input_cache_read: 4,
                    input_cache_creation: 0
                }),
                StreamEvent::Finish("stop".into()),
            ]
        );
    }

    #[test]
    fn empty_usage_and_odd_finish_reasons_are_tolerated() {
        let (out, end) = decode(&[
            json!({"choices": [{"delta": {"content": "a"}, "finish_reason": ""}], "usage": {}}),
            json!({"choices": [{"delta": {"content": null}, "finish_reason": "eos_token"}]}),
        ]);
        assert_eq!(end, Ok(()));
        assert_eq!(
            out,
            vec![
                StreamEvent::Part(ContentPart::text("a")),
                StreamEvent::Finish("eos_token".into())
            ]
        );
    }

    #[test]
    fn an_empty_body_is_complete_and_empty() {
        assert_eq!(decode(&[]), (Vec::new(), Ok(())));
    }

    #[test]
    fn a_body_without_done_or_finish_reason_is_truncated() {
        let (_, end) = decode(&[json!({"choices": [{"delta": {"content": "a"}}]})]);
        assert_eq!(
            end,
            Err(ChatError::Connection {
                message: TRUNCATED.into()
            })
        );
    }

    #[test]
    fn error_members_and_events() {
        let mut decoder = Decoder::new(None, false, ToolNames::default());
        let mut out = Vec::new();
        let rows = [
            (
                "",
                r#"{"error":{"message":"overloaded","type":"x"}}"#,
                "Error: overloaded",
            ),
            (
                "",
                r#"{"error":{"code":1}}"#,
                "Error: An error occurred during streaming",
            ),
            ("error", r#"{"message":"boom"}"#, "Error: boom"),
        ];
        for (event, data, expected) in rows {
            assert_eq!(
                decoder.on_event(event, data, &mut out),
                Err(ChatError::provider(expected)),
                "{data}"
            );
        }
        assert_eq!(
            decoder.on_event("", r#"{"error":null,"choices":[]}"#, &mut out),
            Ok(Flow::More)
        );
    }

    #[test]
    fn whole_answer() {
        let decoder = Decoder::new(Some("reasoning_content".into()), true, ToolNames::default());
        let body = json!({
            "id": "w",
            "choices": [{"message": {"role": "assistant", "content": "ok", "reasoning_content": "hm",
                "tool_calls": [{"id": "t", "type": "function", "function": {"name": "A", "arguments": "{}"}}]},
                "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1,
                "prompt_tokens_details": {"cached_tokens": 2}}
        });
        let out = decoder.whole(&body.to_string());
        assert_eq!(
            out,
            Ok(vec![
                StreamEvent::MessageId("w".into()),
                StreamEvent::Part(ContentPart::think("hm")),
                StreamEvent::Part(ContentPart::text("ok")),
                StreamEvent::ToolCall(kimi_wire::message::ToolCall::new("t", "A", Some("{}".into()))),
                StreamEvent::Usage(TokenUsage {
                    input_other: 1,
                    output: 1,
                    input_cache_read: 2,
                    input_cache_creation: 0
                }),
                StreamEvent::Finish("tool_calls".into()),
            ])
        );
    }
}
