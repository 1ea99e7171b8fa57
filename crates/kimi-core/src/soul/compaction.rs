//! Context compaction (reference `soul/compaction.py` and `KimiSoul.compact_context`).
//!
//! The last two user/assistant messages (and what follows them) are kept; everything before is sent to
//! the same model with a summarizing instruction, and the context restarts (the old file rotated to
//! `context_N.jsonl`) as: the summary (as a user message), then the kept messages. Runs automatically at
//! the start of a step when the context is nearly full, or on `/compact [focus]`.

use futures::StreamExt;
use kimi_llm::{ChatError, ChatRequest, Message, Role, StreamEvent};
use kimi_wire::message::{CompactionBegin, CompactionEnd, ContentPart, Event, TokenUsage};

use super::{Soul, TurnError};
use crate::config::HookEvent;
use crate::context::estimate_tokens;
use crate::hooks::input as hook_input;

/// How many user/assistant messages survive a compaction verbatim.
const MAX_PRESERVED_MESSAGES: usize = 2;
/// The summarizer's system prompt (reference text; it is what the model sees, not an interface string,
/// but keeping it makes summaries comparable between the two implementations).
const SYSTEM_PROMPT: &str = "You are a helpful assistant that compacts conversation context.";
/// The marker in front of the summary (reference text, kept so resumed sessions read the same).
const OUTPUT_PREFIX: &str = "Previous context has been compacted. Here is the compaction output:";
/// Our instructions for the summary.
const INSTRUCTIONS: &str = include_str!("../prompts/compact.md");

/// Why a compaction runs (the hooks' matcher value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CompactionTrigger {
    /// The context is nearly full.
    Auto,
    /// `/compact`.
    Manual,
}

impl CompactionTrigger {
    fn as_str(self, custom_instruction: &str) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Manual if custom_instruction.is_empty() => "manual",
            Self::Manual => "manual-with-prompt",
        }
    }
}

/// What to send to the summarizer and what to keep.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Prepared {
    /// The single user message asking for the summary; `None` when nothing needs summarizing.
    pub request: Option<Message>,
    /// The messages kept verbatim.
    pub preserved: Vec<Message>,
}

/// Splits `history` into the part to summarize and the part to keep.
pub(crate) fn prepare(history: &[Message], custom_instruction: &str) -> Prepared {
    let mut seen = 0;
    let mut start = None;
    for (index, message) in history.iter().enumerate().rev() {
        if matches!(message.role, Role::User | Role::Assistant) {
            seen += 1;
            if seen == MAX_PRESERVED_MESSAGES {
                start = Some(index);
                break;
            }
        }
    }
    let Some(start) = start else {
        return Prepared {
            request: None,
            preserved: history.to_vec(),
        };
    };
    let (to_compact, preserved) = history.split_at(start);
    if to_compact.is_empty() {
        return Prepared {
            request: None,
            preserved: preserved.to_vec(),
        };
    }
    let mut content = Vec::new();
    for (i, message) in to_compact.iter().enumerate() {
        content.push(ContentPart::text(format!(
            "## Message {}\nRole: {}\nContent:\n",
            i + 1,
            message.role.as_str()
        )));
        content.extend(
            message
                .content
                .iter()
                .filter(|p| matches!(p, ContentPart::Text(_)))
                .cloned(),
        );
    }
    let mut instructions = format!("\n{INSTRUCTIONS}");
    if !custom_instruction.is_empty() {
        instructions.push_str(
            "\n\n**The user's focus for this compaction:**\nGive this priority over the default order above:\n",
        );
        instructions.push_str(custom_instruction);
    }
    content.push(ContentPart::text(instructions));
    Prepared {
        request: Some(Message::user(content)),
        preserved: preserved.to_vec(),
    }
}

impl Soul {
    /// Is the context full enough to compact before the next model call?
    pub(crate) async fn should_auto_compact(&self) -> bool {
        let tokens = self.context.lock().await.token_count_with_pending();
        let max = self.model.max_context_size;
        if max == 0 {
            return false;
        }
        tokens as f64 >= max as f64 * self.settings.compaction_trigger_ratio
            || tokens + self.settings.reserved_context_size >= max
    }

    /// Compacts the context, sending `CompactionBegin` / `CompactionEnd` and running the compaction
    /// hooks (`PreCompact` awaited, `PostCompact` in the background).
    pub(crate) async fn compact(
        &self,
        trigger: CompactionTrigger,
        custom_instruction: &str,
    ) -> Result<(), TurnError> {
        let before = self.context.lock().await.token_count_with_pending();
        let reason = trigger.as_str(custom_instruction);
        let _ = self
            .hooks
            .trigger(
                HookEvent::PreCompact,
                reason,
                hook_input::pre_compact(reason, before),
            )
            .await;
        self.events.emit(Event::CompactionBegin(CompactionBegin {})).await;
        let (system_prompt, history) = {
            let context = self.context.lock().await;
            (context.system_prompt().to_owned(), context.history())
        };
        let prepared = prepare(&history, custom_instruction);
        let (mut messages, usage) = match &prepared.request {
            None => (Vec::new(), None),
            Some(request) => {
                let (summary, usage) = self.summarize(request).await?;
                let mut content = vec![super::system(OUTPUT_PREFIX)];
                content.extend(
                    summary
                        .into_iter()
                        .filter(|p| !matches!(p, ContentPart::Think(_))),
                );
                (vec![Message::user(content)], usage)
            }
        };
        let estimate = match usage {
            Some(usage) => usage.output + estimate_tokens(&prepared.preserved),
            None => estimate_tokens(&prepared.preserved),
        };
        messages.extend(prepared.preserved);
        {
            let mut context = self.context.lock().await;
            context.clear().await?;
            context.checkpoint()?;
            for message in messages {
                context.append(message)?;
            }
            context.update_token_count(estimate)?;
        }
        tracing::debug!(prompt_len = system_prompt.len(), estimate, "context compacted");
        self.events.emit(Event::CompactionEnd(CompactionEnd {})).await;
        let input = hook_input::post_compact(reason, estimate);
        self.hooks
            .trigger_detached(HookEvent::PostCompact, reason.to_owned(), input);
        Ok(())
    }

    /// One summarizing model call, retried like a step but without `StepRetry` events (reference).
    async fn summarize(
        &self,
        request: &Message,
    ) -> Result<(Vec<ContentPart>, Option<TokenUsage>), TurnError> {
        let llm = self.llm.clone().ok_or(TurnError::LlmNotSet)?;
        let history = std::slice::from_ref(request);
        let max_attempts = self.settings.max_retries_per_step.max(1);
        let mut attempt = 1;
        loop {
            let result: Result<_, ChatError> = async {
                let mut stream = llm
                    .generate(ChatRequest {
                        system_prompt: SYSTEM_PROMPT,
                        tools: &[],
                        history,
                    })
                    .await?;
                let mut parts = Vec::new();
                let mut usage = None;
                while let Some(event) = stream.next().await {
                    match event? {
                        StreamEvent::Part(part) => parts.push(part),
                        StreamEvent::Usage(u) => usage = Some(u),
                        StreamEvent::ToolCall(_)
                        | StreamEvent::ToolCallPart(_)
                        | StreamEvent::MessageId(_)
                        | StreamEvent::Finish(_) => {}
                    }
                }
                Ok((parts, usage))
            }
            .await;
            match result {
                Ok(done) => return Ok(done),
                Err(e) if e.is_retryable() && attempt < max_attempts => {
                    tokio::time::sleep(self.settings.retry_backoff.wait(attempt, e.retry_after())).await;
                    attempt += 1;
                }
                Err(e) => return Err(TurnError::Provider(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Message {
        Message::user(vec![ContentPart::text(text)])
    }

    fn assistant(text: &str) -> Message {
        Message::assistant(vec![ContentPart::text(text)], Vec::new())
    }

    #[test]
    fn two_messages_are_kept_and_nothing_is_summarized() {
        let history = vec![user("hi"), assistant("hello")];
        assert_eq!(
            prepare(&history, ""),
            Prepared {
                request: None,
                preserved: history
            }
        );
    }

    #[test]
    fn older_messages_are_summarized_with_their_roles() {
        let history = vec![user("a"), assistant("b"), user("c"), assistant("d")];
        let prepared = prepare(&history, "keep db");
        assert_eq!(prepared.preserved, vec![user("c"), assistant("d")]);
        let request = prepared.request.unwrap();
        let text = request.text();
        assert!(
            text.starts_with(
                "## Message 1\nRole: user\nContent:\na## Message 2\nRole: assistant\nContent:\nb"
            )
        );
        assert!(text.ends_with("keep db"));
    }
}
