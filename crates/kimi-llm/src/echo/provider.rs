//! `_echo`: the script is the text of the last user message.

use crate::{ChatError, ChatProvider, ChatRequest, ChatStream, Role};

use super::{into_stream, parse_script};

/// The `_echo` provider: each call streams the DSL script written in the
/// last message of the history, which must be a user message.
///
/// Errors, as the reference words them: an empty history, a last message
/// that is not from the user, any DSL error, and a script with no parts
/// (`EchoChatProvider DSL produced no streamable parts.`, which is also what
/// a last user message without text gives). All are plain provider errors
/// except a script's own `error:` line.
#[derive(Debug, Clone, Copy, Default)]
pub struct EchoProvider;

impl EchoProvider {
    /// A new echo provider.
    pub fn new() -> Self {
        Self
    }
}

#[async_trait::async_trait]
impl ChatProvider for EchoProvider {
    fn model_name(&self) -> &str {
        "echo"
    }

    async fn generate(&self, request: ChatRequest<'_>) -> Result<ChatStream, ChatError> {
        let Some(last) = request.history.last() else {
            return Err(ChatError::provider(
                "EchoChatProvider requires at least one message in history.",
            ));
        };
        if last.role != Role::User {
            return Err(ChatError::provider(
                "EchoChatProvider expects the last history message to be user.",
            ));
        }
        let script = parse_script(&last.text())?;
        if !script.has_parts() {
            return Err(ChatError::provider(
                "EchoChatProvider DSL produced no streamable parts.",
            ));
        }
        Ok(into_stream(script))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, StreamEvent};
    use futures::StreamExt as _;
    use kimi_wire::message::{ContentPart, ImageUrlPart, MediaUrl};
    use pretty_assertions::assert_eq;

    async fn call(history: &[Message]) -> Result<Vec<StreamEvent>, ChatError> {
        let request = ChatRequest {
            system_prompt: "",
            tools: &[],
            history,
        };
        let stream = EchoProvider.generate(request).await?;
        stream.collect::<Vec<_>>().await.into_iter().collect()
    }

    #[tokio::test]
    async fn streams_the_last_user_message() {
        let history = [
            Message::user_text("text: ignored"),
            Message::user(vec![
                ContentPart::text("text: a\n"),
                ContentPart::think("text: not read"),
                ContentPart::text("id: m\ntext: b"),
            ]),
        ];
        assert_eq!(
            call(&history).await,
            Ok(vec![
                StreamEvent::MessageId("m".into()),
                StreamEvent::Part(ContentPart::text("a")),
                StreamEvent::Part(ContentPart::text("b")),
            ])
        );
        assert_eq!(EchoProvider.model_name(), "echo");
    }

    #[tokio::test]
    async fn errors() {
        let no_parts = ChatError::provider("EchoChatProvider DSL produced no streamable parts.");
        let image = ContentPart::ImageUrl(ImageUrlPart {
            image_url: MediaUrl::new("u"),
        });
        let rows: Vec<(Vec<Message>, ChatError)> = vec![
            (
                vec![],
                ChatError::provider("EchoChatProvider requires at least one message in history."),
            ),
            (
                vec![Message::user_text("text: x"), Message::assistant(vec![], vec![])],
                ChatError::provider("EchoChatProvider expects the last history message to be user."),
            ),
            (vec![Message::user(vec![image])], no_parts.clone()),
            (vec![Message::user_text("# only a comment")], no_parts),
            (
                vec![Message::user_text("hello")],
                ChatError::provider("Invalid echo DSL at line 1: 'hello'"),
            ),
            (
                vec![Message::user_text("error: timeout")],
                ChatError::Timeout {
                    message: "Simulated timeout error".into(),
                },
            ),
        ];
        for (history, expected) in rows {
            assert_eq!(call(&history).await, Err(expected), "{history:?}");
        }
    }
}
