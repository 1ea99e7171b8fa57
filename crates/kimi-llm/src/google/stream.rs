//! `streamGenerateContent?alt=sse` chunks decoded into [`StreamEvent`]s.
//!
//! Each event's data is a `GenerateContentResponse`: `candidates[].content.parts[]` holding the new
//! text (`thought: true` marks thinking), whole `functionCall`s with their `thoughtSignature`,
//! `finishReason` on the last chunk, `usageMetadata` and `responseId`. Reference: kosong's
//! `GoogleGenAIStreamedMessage`:
//! - a call's id is `<name>_<id the API gave, or a fresh one>`, its arguments the Python `json.dumps`
//!   of `args` (`{}` without any), its signature kept in `extras.thought_signature_b64`;
//! - signatures on text parts are not kept (the API only requires those of function calls).
//!
//! Usage: `promptTokenCount` counts cached tokens too, so `input_other` is the prompt minus
//! `cachedContentTokenCount` (the reference adds the cache on top and so counts it twice);
//! `candidatesTokenCount` is the output, as in the reference.
//!
//! A stream ends complete after a chunk with a `finishReason`; one that ends before, after some
//! chunks, was cut off (retryable); an empty one is an empty answer. An `{"error": ...}` chunk is the
//! SDK's `APIError` with the code it names.

use kimi_wire::message::{ContentPart, TokenUsage, ToolCall};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::errors::from_stream_error;
use super::request::THOUGHT_SIGNATURE_KEY;
use crate::py::{Dumps, dumps};
use crate::sse::{Decode, Flow, ended, malformed};
use crate::tool_names::ToolNames;
use crate::{ChatError, StreamEvent};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk {
    #[serde(default)]
    candidates: Vec<Candidate>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    response_id: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Content {
    #[serde(default)]
    parts: Vec<Part>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(default)]
    thought_signature: Option<String>,
    #[serde(default)]
    function_call: Option<FunctionCall>,
}

#[derive(Debug, Default, Deserialize)]
struct FunctionCall {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: u64,
    #[serde(default)]
    candidates_token_count: u64,
    #[serde(default)]
    cached_content_token_count: u64,
}

impl UsageMetadata {
    fn to_token_usage(&self) -> TokenUsage {
        let cached = self.cached_content_token_count.min(self.prompt_token_count);
        TokenUsage {
            input_other: self.prompt_token_count - cached,
            output: self.candidates_token_count,
            input_cache_read: cached,
            input_cache_creation: 0,
        }
    }
}

/// Decoding state for one answer.
#[derive(Debug)]
pub(crate) struct Decoder {
    names: ToolNames,
    message_id: Option<String>,
    usage: Option<TokenUsage>,
    saw_chunk: bool,
    /// The candidate's `finishReason`, once one was given.
    finish_reason: Option<String>,
}

impl Decoder {
    pub(crate) fn new(names: ToolNames) -> Self {
        Self {
            names,
            message_id: None,
            usage: None,
            saw_chunk: false,
            finish_reason: None,
        }
    }

    fn on_part(&self, part: Part, out: &mut Vec<StreamEvent>) {
        if part.thought == Some(true) {
            if let Some(text) = part.text.filter(|t| !t.is_empty()) {
                out.push(StreamEvent::Part(ContentPart::think(text)));
            }
            return;
        }
        if let Some(text) = part.text.filter(|t| !t.is_empty()) {
            out.push(StreamEvent::Part(ContentPart::text(text)));
            return;
        }
        let Some(call) = part.function_call else {
            return;
        };
        let Some(name) = call.name.filter(|n| !n.is_empty()) else {
            tracing::warn!("dropping a function call without a name");
            return;
        };
        let id = call
            .id
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        let arguments = match call.args {
            Some(Value::Object(map)) if !map.is_empty() => dumps(&Value::Object(map), Dumps::DEFAULT),
            _ => "{}".to_owned(),
        };
        let mut tool_call = ToolCall::new(format!("{name}_{id}"), self.names.ours(&name), Some(arguments));
        tool_call.extras = part.thought_signature.filter(|s| !s.is_empty()).map(|signature| {
            let mut extras = Map::new();
            extras.insert(THOUGHT_SIGNATURE_KEY.into(), Value::String(signature));
            extras
        });
        out.push(StreamEvent::ToolCall(tool_call));
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        if let Some(usage) = self.usage.take() {
            out.push(StreamEvent::Usage(usage));
        }
        if let Some(reason) = self.finish_reason.take() {
            out.push(StreamEvent::Finish(reason));
        }
    }
}

impl Decode for Decoder {
    fn on_event(&mut self, _event: &str, data: &str, out: &mut Vec<StreamEvent>) -> Result<Flow, ChatError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(Flow::More);
        }
        let value: Value = serde_json::from_str(data).map_err(|e| malformed(&e, data))?;
        if value.get("error").is_some_and(|e| !e.is_null()) {
            return Err(from_stream_error(&value));
        }
        let chunk: Chunk = serde_json::from_value(value).map_err(|e| {
            ChatError::provider(format!(
                "Unexpected GoogleGenAI error: bad chunk in the stream ({e})"
            ))
        })?;
        self.saw_chunk = true;
        if self.message_id.is_none()
            && let Some(id) = chunk.response_id.filter(|id| !id.is_empty())
        {
            self.message_id = Some(id.clone());
            out.push(StreamEvent::MessageId(id));
        }
        if let Some(usage) = &chunk.usage_metadata {
            self.usage = Some(usage.to_token_usage());
        }
        for candidate in chunk.candidates {
            if let Some(reason) = candidate.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(reason);
            }
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                self.on_part(part, out);
            }
        }
        Ok(Flow::More)
    }

    fn on_eof(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ChatError> {
        ended(self.saw_chunk, self.finish_reason.is_some())?;
        self.finish(out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::{replay, truncated};
    use pretty_assertions::assert_eq;

    fn decode(chunks: &[&str]) -> (Vec<StreamEvent>, Result<(), ChatError>) {
        let pairs: Vec<(&str, &str)> = chunks.iter().map(|d| ("", *d)).collect();
        replay(&mut Decoder::new(ToolNames::default()), &pairs)
    }

    /// Thought summary, text, then a signed function call. Where this comes from: written by hand after
    /// the `GenerateContentResponse` chunks that `streamGenerateContent?alt=sse` documents
    /// (https://ai.google.dev/api/generate-content, thought parts and `thoughtSignature` as the
    /// thinking guide shows them), trimmed, with our own ids, texts, signature and usage; no live API
    /// was called.
    const THINKING_TOOL_TURN: &[&str] = &[
        r#"{"candidates":[{"content":{"parts":[{"text":"**Reading** the file","thought":true}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":1200,"totalTokenCount":1230,"thoughtsTokenCount":30},"modelVersion":"gemini-2.5-pro","responseId":"resp-g1"}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":"Let me look."}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-pro","responseId":"resp-g1"}"#,
        r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"ReadFile","args":{"path":"a.txt","n":1}},"thoughtSignature":"CiQBcsjafQ=="}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":1200,"candidatesTokenCount":25,"totalTokenCount":1255,"cachedContentTokenCount":1000,"thoughtsTokenCount":30},"modelVersion":"gemini-2.5-pro","responseId":"resp-g1"}"#,
    ];

    #[test]
    fn thought_text_and_a_signed_call() {
        let (out, end) = decode(THINKING_TOOL_TURN);
        assert_eq!(end, Ok(()));
        let Some(StreamEvent::ToolCall(call)) = out.get(3) else {
            panic!("no tool call: {out:?}");
        };
        assert!(call.id.starts_with("ReadFile_"), "{}", call.id);
        let mut expected = ToolCall::new(
            call.id.clone(),
            "ReadFile",
            Some(r#"{"path": "a.txt", "n": 1}"#.into()),
        );
        let mut extras = Map::new();
        extras.insert(THOUGHT_SIGNATURE_KEY.into(), Value::String("CiQBcsjafQ==".into()));
        expected.extras = Some(extras);
        assert_eq!(
            out,
            vec![
                StreamEvent::MessageId("resp-g1".into()),
                StreamEvent::Part(ContentPart::think("**Reading** the file")),
                StreamEvent::Part(ContentPart::text("Let me look.")),
                StreamEvent::ToolCall(expected),
                StreamEvent::Usage(TokenUsage {
                    input_other: 200,
                    output: 25,
                    input_cache_read: 1000,
                    input_cache_creation: 0
                }),
                StreamEvent::Finish("STOP".into()),
            ]
        );
    }

    #[test]
    fn ids_given_by_the_api_are_kept_and_bare_calls_get_empty_arguments() {
        let (out, _) = decode(&[
            r#"{"candidates":[{"content":{"parts":[{"functionCall":{"id":"abc","name":"Glob"}}]},"finishReason":"STOP"}]}"#,
        ]);
        assert_eq!(
            out,
            vec![
                StreamEvent::ToolCall(ToolCall::new("Glob_abc", "Glob", Some("{}".into()))),
                StreamEvent::Finish("STOP".into()),
            ]
        );
    }

    #[test]
    fn endings_and_errors() {
        assert_eq!(decode(&THINKING_TOOL_TURN[..2]).1, Err(truncated()));
        assert_eq!(decode(&[]), (vec![], Ok(())));
        let error = r#"{"error":{"code":429,"message":"Slow down.","status":"RESOURCE_EXHAUSTED"}}"#;
        let end = decode(&[THINKING_TOOL_TURN[0], error]).1.unwrap_err();
        assert_eq!(end.status_code(), Some(429));
        assert_eq!(
            end.to_string(),
            "Rate limit exceeded: 429 RESOURCE_EXHAUSTED. {'error': {'code': 429, 'message': 'Slow down.', 'status': 'RESOURCE_EXHAUSTED'}}"
        );
    }
}
