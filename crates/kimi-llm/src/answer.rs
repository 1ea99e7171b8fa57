//! One model call's answer assembled from its stream: what a cassette records and plays back, and what
//! a side question reads.

use futures::StreamExt as _;
use kimi_wire::message::{ContentPart, TokenUsage, ToolCall};
use serde::{Deserialize, Serialize};

use crate::{ChatError, ChatStream, StreamEvent};

/// A whole answer: its parts joined as the conversation keeps them, its tool calls with their whole
/// arguments.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The provider's id for the message (the completion id), when it gave one.
    #[serde(default)]
    pub id: Option<String>,
    /// Text, thinking and media parts in order; consecutive text (and thinking) joined.
    #[serde(default)]
    pub content: Vec<ContentPart>,
    /// The tool calls, in order, each with its whole arguments.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Token usage, when the provider reported it.
    #[serde(default)]
    pub usage: Option<TokenUsage>,
    /// Why the model stopped, as the provider said it.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

impl Answer {
    /// Reads `stream` to its end.
    pub async fn collect(mut stream: ChatStream) -> Result<Self, ChatError> {
        let mut answer = Self::default();
        while let Some(event) = stream.next().await {
            answer.push(event?);
        }
        Ok(answer)
    }

    /// Adds one streamed event.
    pub fn push(&mut self, event: StreamEvent) {
        match event {
            StreamEvent::Part(part) => push_part(&mut self.content, part),
            StreamEvent::ToolCall(call) => self.tool_calls.push(call),
            StreamEvent::ToolCallPart(part) => {
                if let (Some(call), Some(piece)) = (self.tool_calls.last_mut(), part.arguments_part) {
                    call.function
                        .arguments
                        .get_or_insert_with(String::new)
                        .push_str(&piece);
                }
            }
            StreamEvent::MessageId(id) => self.id = Some(id),
            StreamEvent::Usage(usage) => self.usage = Some(usage),
            StreamEvent::Finish(reason) => self.finish_reason = Some(reason),
        }
    }

    /// The text parts joined (thinking left out).
    pub fn text(&self) -> String {
        self.content.iter().filter_map(ContentPart::as_text).collect()
    }

    /// The answer as a stream would deliver it: the id, each part, each call whole, the usage and
    /// the finish reason.
    pub fn into_events(self) -> Vec<StreamEvent> {
        let mut events = Vec::with_capacity(self.content.len() + self.tool_calls.len() + 3);
        events.extend(self.id.map(StreamEvent::MessageId));
        events.extend(self.content.into_iter().map(StreamEvent::Part));
        events.extend(self.tool_calls.into_iter().map(StreamEvent::ToolCall));
        events.extend(self.usage.map(StreamEvent::Usage));
        events.extend(self.finish_reason.map(StreamEvent::Finish));
        events
    }
}

/// Appends a streamed part, joining it to the previous one as the reference's merged message does:
/// text to text, thinking to thinking until a part carries its encrypted signature.
pub fn push_part(parts: &mut Vec<ContentPart>, part: ContentPart) {
    match (parts.last_mut(), part) {
        (Some(ContentPart::Text(last)), ContentPart::Text(next)) => last.text.push_str(&next.text),
        (Some(ContentPart::Think(last)), ContentPart::Think(next)) if last.encrypted.is_none() => {
            last.think.push_str(&next.think);
            last.encrypted = next.encrypted;
        }
        (_, part) => parts.push(part),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kimi_wire::message::ToolCallPart;
    use pretty_assertions::assert_eq;

    #[test]
    fn consecutive_text_parts_merge_and_others_do_not() {
        let mut parts = Vec::new();
        push_part(&mut parts, ContentPart::text("a"));
        push_part(&mut parts, ContentPart::text("b"));
        push_part(&mut parts, ContentPart::think("t"));
        push_part(&mut parts, ContentPart::think("u"));
        push_part(&mut parts, ContentPart::text("c"));
        assert_eq!(
            parts,
            vec![
                ContentPart::text("ab"),
                ContentPart::think("tu"),
                ContentPart::text("c")
            ]
        );
    }

    #[test]
    fn an_answer_assembles_its_stream_and_plays_it_back_whole() {
        let usage = TokenUsage {
            input_other: 3,
            output: 2,
            input_cache_read: 0,
            input_cache_creation: 0,
        };
        let streamed = vec![
            StreamEvent::MessageId("c1".into()),
            StreamEvent::Part(ContentPart::think("hm")),
            StreamEvent::Part(ContentPart::text("Hel")),
            StreamEvent::Part(ContentPart::text("lo")),
            StreamEvent::ToolCall(ToolCall::new("t1", "Shell", None)),
            StreamEvent::ToolCallPart(ToolCallPart {
                arguments_part: Some("{\"command\":".into()),
            }),
            StreamEvent::ToolCallPart(ToolCallPart {
                arguments_part: Some("\"ls\"}".into()),
            }),
            StreamEvent::Usage(usage),
            StreamEvent::Finish("tool_calls".into()),
        ];
        let mut answer = Answer::default();
        for event in streamed {
            answer.push(event);
        }
        assert_eq!(answer.text(), "Hello");
        let shell = ToolCall::new("t1", "Shell", Some("{\"command\":\"ls\"}".into()));
        assert_eq!(
            answer.clone().into_events(),
            vec![
                StreamEvent::MessageId("c1".into()),
                StreamEvent::Part(ContentPart::think("hm")),
                StreamEvent::Part(ContentPart::text("Hello")),
                StreamEvent::ToolCall(shell),
                StreamEvent::Usage(usage),
                StreamEvent::Finish("tool_calls".into()),
            ]
        );
        let again: Answer = serde_json::from_value(serde_json::to_value(&answer).unwrap()).unwrap();
        assert_eq!(again, answer);
    }
}
