//! One turn: `TurnBegin`, the steps, `TurnEnd` on every path (reference `KimiSoul.run` / `_agent_loop`).

use std::sync::atomic::Ordering;

use kimi_llm::{Message, Role};
use kimi_wire::message::{
    ContentPart, Event, MCPLoadingBegin, MCPLoadingEnd, StatusUpdate, SteerInput, StepBegin, StepInterrupted,
    TurnBegin, TurnEnd, UserInput,
};
use tokio_util::sync::CancellationToken;

use super::compaction::CompactionTrigger;
use super::step::{StepOutcome, Unfinished};
use super::{Soul, TurnError, TurnOutcome};

/// How a model turn ended, with what flows need beyond the outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LoopReport {
    /// The outcome the prompt reports.
    pub outcome: TurnOutcome,
    /// Steps run.
    pub steps: u32,
    /// The user rejected a tool call and the turn stopped for it.
    pub rejected: bool,
}

impl LoopReport {
    fn new(outcome: TurnOutcome, steps: u32) -> Self {
        Self {
            outcome,
            steps,
            rejected: false,
        }
    }
}
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
        crate::sync::lock(&self.open_calls).clear();
        crate::sync::lock(&self.dedup).reset();
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
        let mut source = ApprovalSource::foreground_turn();
        if let Some(me) = &self.subagent {
            source.agent_id = Some(me.agent_id.clone());
            source.subagent_type = Some(me.subagent_type.clone());
            if let Some(task) = &me.background_task {
                source.kind = kimi_wire::message::ApprovalSourceKind::BackgroundAgent;
                source.id.clone_from(task);
            }
        }
        let result = tokio::select! {
            biased;
            () = cancel.cancelled() => Ok(TurnOutcome::Cancelled),
            result = self.turn_with_stop_hook(input, &source, &cancel) => result,
        };
        // A cancel drops the step with its calls: each call the client saw still gets its ToolResult.
        self.close_open_calls(Unfinished::Cancelled).await;
        // A cancel drops nested turns (flow nodes, `/init`) before they end: close them first, so every
        // TurnBegin has its TurnEnd.
        for _ in 0..self.open_nested_turns.swap(0, Ordering::SeqCst) {
            self.events.emit(Event::TurnEnd(TurnEnd {})).await;
        }
        self.deliver_notifications_to_client().await;
        self.events.emit(Event::TurnEnd(TurnEnd {})).await;
        self.approvals.cancel_source(&source.id).await;
        // A turn whose history could not be saved did not finish well, whatever the model did.
        let persisted = self.persist(true).await;
        match (result, persisted) {
            (Ok(_), Err(e)) => Err(e.into()),
            (result, _) => result,
        }
    }

    /// The turn body, then the `Stop` hook: a block with a reason runs one more model turn with that
    /// reason as the user's input (reference: at most once, neither a command nor a Ralph loop).
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
            Some(reason) => Ok(self
                .model_turn(vec![ContentPart::text(reason)], source, cancel)
                .await?
                .outcome),
            None => Ok(outcome),
        }
    }

    async fn turn_body(
        &self,
        input: UserInput,
        source: &ApprovalSource,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, TurnError> {
        if let Some(outcome) = self.run_slash_command(&input, source, cancel).await {
            return outcome;
        }
        if let Some(outcome) = self.ralph_turn(&input, source, cancel).await {
            return outcome;
        }
        Ok(self.model_turn(input.to_parts(), source, cancel).await?.outcome)
    }

    /// One model turn on `parts` (reference `_turn`): a checkpoint, the user message, then steps until
    /// the model stops. Slash commands that talk to the model (`/skill:`, flow nodes) use it too.
    pub(crate) async fn model_turn(
        &self,
        parts: Vec<ContentPart>,
        source: &ApprovalSource,
        cancel: &CancellationToken,
    ) -> Result<LoopReport, TurnError> {
        if self.llm.is_none() {
            return Err(TurnError::LlmNotSet);
        }
        self.check_capabilities(&parts)?;
        {
            let mut context = self.context.lock().await;
            context.checkpoint()?;
            context.append(Message::user(parts))?;
        }
        if let Some(skills) = self.skills() {
            skills.begin_turn();
        }
        // Before the model is asked: a session that cannot be recorded (disk full, the directory
        // unwritable) fails the prompt at once with the file and the reason, instead of running a turn
        // nobody can resume.
        self.persist(false).await?;
        self.agent_loop(source, cancel).await
    }

    /// A turn inside the current one, between its own `TurnBegin{prompt}` and `TurnEnd` (flow nodes,
    /// `/init`). The `TurnEnd` is sent on errors too; a cancel leaves it to [`Soul::run_turn`].
    pub(crate) async fn nested_turn<T>(
        &self,
        prompt: UserInput,
        body: impl Future<Output = Result<T, TurnError>>,
    ) -> Result<T, TurnError> {
        self.events
            .emit(Event::TurnBegin(TurnBegin { user_input: prompt }))
            .await;
        self.open_nested_turns.fetch_add(1, Ordering::SeqCst);
        let result = body.await;
        self.open_nested_turns.fetch_sub(1, Ordering::SeqCst);
        self.events.emit(Event::TurnEnd(TurnEnd {})).await;
        result
    }

    /// The text of the model's last answer, when the last turn ended with one (no pending tool calls).
    pub(crate) async fn final_answer(&self) -> Option<String> {
        let context = self.context.lock().await;
        let last = context.messages().last()?;
        (last.role == Role::Assistant && last.tool_calls.is_empty()).then(|| last.text())
    }

    async fn agent_loop(
        &self,
        source: &ApprovalSource,
        cancel: &CancellationToken,
    ) -> Result<LoopReport, TurnError> {
        self.wait_for_mcp().await;
        let mut step_no: u32 = 0;
        loop {
            step_no += 1;
            if step_no > self.settings.max_steps_per_turn {
                let limit = self.settings.max_steps_per_turn;
                return Ok(LoopReport::new(TurnOutcome::MaxStepsReached(limit), limit));
            }
            self.events.emit(Event::StepBegin(StepBegin { n: step_no })).await;
            if self.should_auto_compact().await
                && let Err(e) = self.compact(CompactionTrigger::Auto, "").await
            {
                return Err(self.step_failed(e).await);
            }
            self.context.lock().await.checkpoint()?;
            if let Some(skills) = self.skills() {
                skills.begin_step();
            }
            let outcome = match self.step(step_no, source, cancel).await {
                Ok(outcome) => outcome,
                Err(e) => return Err(self.step_failed(e).await),
            };
            if let Err(e) = self.check_files().await {
                return Err(self.step_failed(TurnError::SessionFile(e)).await);
            }
            let steered = self.consume_steers().await?;
            match outcome {
                StepOutcome::Continue => {}
                StepOutcome::Stop | StepOutcome::Rejected if steered => {}
                StepOutcome::Stop => return Ok(LoopReport::new(TurnOutcome::Finished, step_no)),
                StepOutcome::Rejected => {
                    return Ok(LoopReport {
                        rejected: true,
                        ..LoopReport::new(TurnOutcome::Finished, step_no)
                    });
                }
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
            TurnError::LlmNotSupported { .. } => "LLMNotSupported".to_owned(),
            TurnError::SessionFile(_) => "RuntimeError".to_owned(),
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
            self.context.lock().await.append(Message::user(parts))?;
            self.events
                .emit(Event::SteerInput(SteerInput { user_input: input }))
                .await;
        }
        Ok(any)
    }

    /// Refuses input the model cannot take (reference `check_message`).
    fn check_capabilities(&self, parts: &[ContentPart]) -> Result<(), TurnError> {
        let mut missing: Vec<&'static str> = parts
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
        Err(TurnError::LlmNotSupported {
            model: self.model.name.clone(),
            missing: missing.into_iter().map(str::to_owned).collect(),
        })
    }
}
