//! One turn: `TurnBegin`, the steps, `TurnEnd` on every path (reference `KimiSoul.run` / `_agent_loop`).

use kimi_llm::Message;
use kimi_wire::message::{
    ContentPart, Event, MCPLoadingBegin, MCPLoadingEnd, StatusUpdate, SteerInput, StepBegin, StepInterrupted,
    TurnBegin, TurnEnd, UserInput,
};
use tokio_util::sync::CancellationToken;

use super::compaction::CompactionTrigger;
use super::step::StepOutcome;
use super::{Soul, TurnError, TurnOutcome};
use crate::approval::ApprovalSource;
use crate::config::HookEvent;
use crate::hooks::{HookDecision, input as hook_input};

impl Soul {
    /// Runs one turn for `input`. Cancelling `cancel` stops it at once: the model stream and running
    /// tools are dropped, pending approvals are rejected, and `TurnEnd` is still sent.
    pub async fn run_turn(
        &self,
        input: UserInput,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, TurnError> {
        // Stale steers from an earlier turn do not leak into this one.
        let _ = self.take_steers();
        super::lock(&self.dedup).reset();
        let prompt = match &input {
            UserInput::Text(text) => text.clone(),
            UserInput::Parts(_) => String::new(),
        };
        let submitted = self
            .hooks
            .trigger(
                HookEvent::UserPromptSubmit,
                &prompt,
                hook_input::user_prompt_submit(&prompt),
            )
            .await;
        self.events
            .emit(Event::TurnBegin(TurnBegin {
                user_input: input.clone(),
            }))
            .await;
        if let HookDecision::Block { reason, .. } = submitted {
            let text = if reason.is_empty() {
                "Prompt blocked by hook.".to_owned()
            } else {
                reason
            };
            self.events
                .emit(Event::ContentPart(ContentPart::text(text)))
                .await;
            self.events.emit(Event::TurnEnd(TurnEnd {})).await;
            return Ok(TurnOutcome::Finished);
        }
        let source = ApprovalSource::foreground_turn();
        let result = tokio::select! {
            biased;
            () = cancel.cancelled() => Ok(TurnOutcome::Cancelled),
            result = self.turn_with_stop_hook(input, &source, &cancel) => result,
        };
        self.deliver_notifications_to_client().await;
        self.events.emit(Event::TurnEnd(TurnEnd {})).await;
        self.approvals.cancel_source(&source.id).await;
        self.flush(true).await;
        result
    }

    /// The turn body, then the `Stop` hook: a block with a reason runs the body once more with that
    /// reason as the user's input (reference: at most once).
    async fn turn_with_stop_hook(
        &self,
        input: UserInput,
        source: &ApprovalSource,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, TurnError> {
        let outcome = self.turn_body(input, source, cancel).await?;
        if outcome != TurnOutcome::Finished {
            return Ok(outcome);
        }
        let decision = self
            .hooks
            .trigger(HookEvent::Stop, "", hook_input::stop(false))
            .await;
        match decision.stop_continuation() {
            Some(reason) => {
                self.turn_body(UserInput::Text(reason.to_owned()), source, cancel)
                    .await
            }
            None => Ok(outcome),
        }
    }

    async fn turn_body(
        &self,
        input: UserInput,
        source: &ApprovalSource,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, TurnError> {
        if let Some(outcome) = self.run_slash_command(&input).await {
            return outcome;
        }
        if self.llm.is_none() {
            return Err(TurnError::LlmNotSet);
        }
        let parts = input.to_parts();
        self.check_capabilities(&parts)?;
        {
            let mut context = self.context.lock().await;
            context.checkpoint().map_err(internal)?;
            context.append(Message::user(parts)).map_err(internal)?;
        }
        self.agent_loop(source, cancel).await
    }

    async fn agent_loop(
        &self,
        source: &ApprovalSource,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, TurnError> {
        self.wait_for_mcp().await;
        let mut step_no: u32 = 0;
        loop {
            step_no += 1;
            if step_no > self.settings.max_steps_per_turn {
                return Ok(TurnOutcome::MaxStepsReached(self.settings.max_steps_per_turn));
            }
            self.events.emit(Event::StepBegin(StepBegin { n: step_no })).await;
            if self.should_auto_compact().await
                && let Err(e) = self.compact(CompactionTrigger::Auto, "").await
            {
                return Err(self.step_failed(e).await);
            }
            self.context.lock().await.checkpoint().map_err(internal)?;
            let outcome = match self.step(step_no, source, cancel).await {
                Ok(outcome) => outcome,
                Err(e) => return Err(self.step_failed(e).await),
            };
            self.flush(false).await;
            let steered = self.consume_steers().await?;
            match outcome {
                StepOutcome::Continue => {}
                StepOutcome::Stop if steered => {}
                StepOutcome::Stop => return Ok(TurnOutcome::Finished),
            }
        }
    }

    /// If MCP servers are still loading, waits for them (bounded) between `StatusUpdate{mcp_status}` +
    /// `MCPLoadingBegin` and `StatusUpdate{mcp_status}` + `MCPLoadingEnd`, as the reference's first turn
    /// does. Servers that failed are reported in the status and the turn goes on without them.
    async fn wait_for_mcp(&self) {
        let Some(mcp) = self.mcp() else { return };
        if !mcp.is_loading() {
            return;
        }
        let status = |mcp_status| {
            Event::StatusUpdate(StatusUpdate {
                mcp_status,
                ..StatusUpdate::default()
            })
        };
        self.events.emit(status(mcp.status())).await;
        self.events.emit(Event::MCPLoadingBegin(MCPLoadingBegin {})).await;
        if tokio::time::timeout(mcp.startup_wait(), mcp.wait_loaded())
            .await
            .is_err()
        {
            tracing::warn!("MCP servers still loading after the startup wait; the turn goes on");
        }
        self.events.emit(status(mcp.status())).await;
        self.events.emit(Event::MCPLoadingEnd(MCPLoadingEnd {})).await;
    }

    /// `StepInterrupted`, then the `StopFailure` hook in the background (matcher: the error's class).
    async fn step_failed(&self, error: TurnError) -> TurnError {
        self.events.emit(Event::StepInterrupted(StepInterrupted {})).await;
        let kind = match &error {
            TurnError::Provider(e) => e.error_type().to_owned(),
            TurnError::LlmNotSet => "LLMNotSet".to_owned(),
            TurnError::LlmNotSupported(_) => "LLMNotSupported".to_owned(),
            TurnError::Internal(_) => "RuntimeError".to_owned(),
        };
        let input = hook_input::stop_failure(&kind, &error.to_string());
        self.hooks.trigger_detached(HookEvent::StopFailure, kind, input);
        error
    }

    /// Appends queued steers to the context, each followed by `SteerInput`. Returns whether any was taken.
    async fn consume_steers(&self) -> Result<bool, TurnError> {
        let steers = self.take_steers();
        let any = !steers.is_empty();
        for input in steers {
            let parts = input.to_parts();
            self.check_capabilities(&parts)?;
            self.context
                .lock()
                .await
                .append(Message::user(parts))
                .map_err(internal)?;
            self.events
                .emit(Event::SteerInput(SteerInput { user_input: input }))
                .await;
        }
        Ok(any)
    }

    /// Refuses input the model cannot take (reference `check_message`).
    fn check_capabilities(&self, parts: &[ContentPart]) -> Result<(), TurnError> {
        let mut missing: Vec<&str> = parts
            .iter()
            .filter_map(|part| match part {
                ContentPart::ImageUrl(_) => Some("image_in"),
                ContentPart::VideoUrl(_) => Some("video_in"),
                ContentPart::Think(_) => Some("thinking"),
                _ => None,
            })
            .filter(|cap| !self.model.capabilities.contains(*cap))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        if missing.is_empty() {
            return Ok(());
        }
        let noun = if missing.len() == 1 {
            "capability"
        } else {
            "capabilities"
        };
        Err(TurnError::LlmNotSupported(format!(
            "LLM model '{}' does not support required {noun}: {}.",
            self.model.name,
            missing.join(", ")
        )))
    }
}

pub(super) fn internal(e: impl std::fmt::Display) -> TurnError {
    TurnError::Internal(format!("SessionFileError: {e}"))
}
