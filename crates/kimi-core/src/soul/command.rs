//! What a slash command may use of the soul that runs it: a [`CommandContext`], made by the soul for
//! one command and handed to `crate::slash`. A command sees the conversation, the session facts, the
//! yolo/afk toggles, plan mode and the skills, and talks to the model only through the loop; the soul's
//! other parts stay out of its reach.

use std::sync::Arc;

use kimi_wire::message::{ContentPart, Event, StatusUpdate, UserInput};
use tokio::sync::MutexGuard;
use tokio_util::sync::CancellationToken;

use super::compaction::CompactionTrigger;
use super::{SessionInfo, Soul, TurnError, TurnOutcome};
use crate::approval::{ApprovalSource, ApprovalState};
use crate::context::Context;
use crate::plan::PlanMode;
use crate::skills::Skills;

/// The slice of a running turn one slash command works with.
pub(crate) struct CommandContext<'a> {
    soul: &'a Soul,
    source: &'a ApprovalSource,
    cancel: &'a CancellationToken,
}

impl Soul {
    /// Runs `input` as a slash command if it is one; `None` means "not a command, run a normal turn".
    pub(crate) async fn run_slash_command(
        &self,
        input: &UserInput,
        source: &ApprovalSource,
        cancel: &CancellationToken,
    ) -> Option<Result<TurnOutcome, TurnError>> {
        let context = CommandContext {
            soul: self,
            source,
            cancel,
        };
        crate::slash::run(&context, input).await
    }
}

impl<'a> CommandContext<'a> {
    /// Streams `text` to the client as (part of) the command's answer.
    pub(crate) async fn say(&self, text: &str) {
        self.soul
            .events
            .emit(Event::ContentPart(ContentPart::text(text)))
            .await;
    }

    /// Sends (and records) a status update.
    pub(crate) async fn status(&self, update: StatusUpdate) {
        self.soul.events.emit(Event::StatusUpdate(update)).await;
    }

    /// A `StatusUpdate` with only the context figures set.
    pub(crate) async fn context_status(&self) -> StatusUpdate {
        let tokens = self.soul.context.lock().await.token_count();
        let max = self.max_context_size();
        StatusUpdate {
            context_usage: Some(if max > 0 { tokens as f64 / max as f64 } else { 0.0 }),
            context_tokens: Some(tokens),
            max_context_tokens: Some(max),
            token_usage: None,
            message_id: None,
            plan_mode: None,
            mcp_status: None,
        }
    }

    /// The conversation, locked until the guard is dropped (drop it before any `await` that emits).
    pub(crate) async fn conversation(&self) -> MutexGuard<'a, Context> {
        self.soul.context.lock().await
    }

    /// The model's context window in tokens (0 when unknown).
    pub(crate) fn max_context_size(&self) -> u64 {
        self.soul.model.max_context_size
    }

    /// Fails with [`TurnError::LlmNotSet`] when no model is configured.
    pub(crate) fn require_model(&self) -> Result<(), TurnError> {
        match self.soul.llm {
            Some(_) => Ok(()),
            None => Err(TurnError::LlmNotSet),
        }
    }

    /// Compacts the conversation by hand (`/compact`), with the user's focus if any.
    pub(crate) async fn compact(&self, custom_instruction: &str) -> Result<(), TurnError> {
        self.soul
            .compact(CompactionTrigger::Manual, custom_instruction)
            .await
    }

    /// Yolo and afk as they stand.
    pub(crate) fn approval_modes(&self) -> ApprovalState {
        self.soul.approvals.state()
    }

    /// Turns yolo (approve everything) on or off.
    pub(crate) fn set_yolo(&self, on: bool) {
        self.soul.approvals.set_yolo(on);
    }

    /// Turns afk (dismiss questions, approve tool calls) on or off.
    pub(crate) fn set_afk(&self, on: bool) {
        self.soul.approvals.set_afk(on);
    }

    /// Plan mode, shared with the plan tools.
    pub(crate) fn plan(&self) -> &'a PlanMode {
        &self.soul.plan
    }

    /// The session facts; `None` for a soul without a session of its own.
    pub(crate) fn session(&self) -> Option<&'a SessionInfo> {
        self.soul.session.as_ref()
    }

    /// The session's skills, if it has any.
    pub(crate) fn skills(&self) -> Option<&'a Arc<Skills>> {
        self.soul.skills.as_ref()
    }

    /// Answers a side question (`/btw`) beside the conversation.
    pub(crate) async fn side_question(&self, question: &str) -> Result<(), TurnError> {
        self.soul.side_question(question).await
    }

    /// One model turn on `parts` in the command's turn (`/skill:`): the loop's own.
    pub(crate) async fn model_turn(&self, parts: Vec<ContentPart>) -> Result<TurnOutcome, TurnError> {
        Ok(self
            .soul
            .model_turn(parts, self.source, self.cancel)
            .await?
            .outcome)
    }

    /// Walks `flow` (`/flow:`), at most `max_turns` node turns.
    pub(crate) async fn walk(
        &self,
        flow: &crate::skills::flow::Flow,
        max_turns: Option<u64>,
    ) -> Result<TurnOutcome, TurnError> {
        self.soul.walk(flow, max_turns, self.source, self.cancel).await
    }

    /// Runs `prompt` as a nested turn on a scratch copy of the soul (same model, tools, approvals and
    /// events, an empty context written nowhere), so the work does not fill the conversation (`/init`).
    pub(crate) async fn scratch_turn(&self, prompt: &str) -> Result<TurnOutcome, TurnError> {
        let scratch = self.soul.scratch().await;
        let turn = scratch.model_turn(vec![ContentPart::text(prompt)], self.source, self.cancel);
        Ok(self
            .soul
            .nested_turn(prompt.to_owned().into(), turn)
            .await?
            .outcome)
    }
}
