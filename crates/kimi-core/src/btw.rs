//! Side questions (`/btw <question>`): answered from the conversation as it stands, beside a running
//! turn if there is one, without entering it.
//!
//! The model gets the same system prompt, history and tool definitions as the main loop (so a
//! provider's prompt cache still matches) plus a user message holding a reminder and the question. It
//! may not use the tools: a first answer that calls one gets each call refused and one more chance;
//! a second such answer is the failure. So a side question costs at most two model calls, is never
//! retried, and leaves the context untouched: only `BtwBegin` and `BtwEnd` are recorded (in
//! `wire.jsonl`, so `replay` shows them). Reference: `soul/btw.py` (its terminal UI only).

use std::sync::Arc;

use kimi_llm::{Answer, ChatError, ChatProvider, ChatRequest, Message};
use kimi_wire::message::{BtwBegin, BtwEnd, ContentPart, Event};

use crate::soul::{Soul, TurnError};

/// Model calls a side question may make: a second one only after the first tried to call tools.
const MAX_CALLS: usize = 2;

/// What the model is told before the question, in a system reminder.
const REMINDER: &str = "The user is asking a side question while the main task carries on without you. \
Answer it in this one reply, from what the conversation above already shows.\n\
- Do not call tools: they are listed only so the request matches the main one, and every call is refused.\n\
- Do not mention being interrupted; the main task continues on its own.\n\
- There is no follow-up: if the conversation does not tell you the answer, say so plainly.";

/// The result every refused tool call gets.
const TOOLS_REFUSED: &str = "Tool calls are disabled for side questions. Answer with text only.";

/// The answer to `/btw` without a question (reference: the input router's usage line).
const USAGE: &str = "Usage: /btw <question>";

impl Soul {
    /// Answers `question` between `BtwBegin` and `BtwEnd`. Fails only when no model is configured
    /// (before `BtwBegin`, as the reference); every other failure is `BtwEnd.error`.
    pub async fn side_question(&self, question: &str) -> Result<(), TurnError> {
        let llm = self.llm.clone().ok_or(TurnError::LlmNotSet)?;
        let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        self.events
            .emit(Event::BtwBegin(BtwBegin {
                id: id.clone(),
                question: question.to_owned(),
            }))
            .await;
        let (response, error) = if question.is_empty() {
            (None, Some(USAGE.to_owned()))
        } else {
            match self.answer_side_question(llm, question).await {
                Ok(text) => (Some(text), None),
                Err(why) => (None, Some(why)),
            }
        };
        self.events
            .emit(Event::BtwEnd(BtwEnd { id, response, error }))
            .await;
        Ok(())
    }

    /// The answer's text, or why there is none.
    async fn answer_side_question(
        &self,
        llm: Arc<dyn ChatProvider>,
        question: &str,
    ) -> Result<String, String> {
        // A snapshot: the running turn keeps the context while the model answers.
        let (system_prompt, history) = {
            let context = self.context.lock().await;
            (context.system_prompt().to_owned(), context.history())
        };
        let tools = self.toolset.specs();
        let mut messages = history.as_ref().clone();
        let asked = format!("{}\n\n{question}", crate::reminders::tagged(REMINDER));
        messages.push(Message::user_text(asked));
        let mut calls = 0;
        loop {
            calls += 1;
            let history = crate::reminders::merged(Arc::new(messages.clone()));
            let request = ChatRequest {
                system_prompt: &system_prompt,
                tools: &tools,
                history: &history,
            };
            let answer = ask(llm.as_ref(), request).await.map_err(|e| e.to_string())?;
            let text = answer.text().trim().to_owned();
            // Text beside a tool call is a preamble, not an answer (reference).
            if answer.tool_calls.is_empty() {
                return if text.is_empty() {
                    Err("No response received.".to_owned())
                } else {
                    Ok(text)
                };
            }
            if calls == MAX_CALLS {
                let names: Vec<&str> = answer
                    .tool_calls
                    .iter()
                    .map(|c| c.function.name.as_str())
                    .collect();
                return Err(format!(
                    "Side question tried to call tools ({}) instead of answering directly. Try rephrasing or ask in the main conversation.",
                    names.join(", ")
                ));
            }
            let refusals: Vec<Message> = answer
                .tool_calls
                .iter()
                .map(|c| Message::tool(c.id.clone(), vec![ContentPart::text(TOOLS_REFUSED)]))
                .collect();
            messages.push(Message::assistant(answer.content, answer.tool_calls));
            messages.extend(refusals);
        }
    }
}

async fn ask(llm: &dyn ChatProvider, request: ChatRequest<'_>) -> Result<Answer, ChatError> {
    Answer::collect(llm.generate(request).await?).await
}
