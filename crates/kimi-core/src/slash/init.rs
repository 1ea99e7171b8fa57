//! `/init`: the model studies the project and writes `AGENTS.md` (reference `slash.py` `init`).
//!
//! The work runs as a nested turn on a scratch context (same model, tools and approvals), so the
//! exploration does not fill the session's context; afterwards the session's context gets a short note
//! with the new `AGENTS.md`.

use std::sync::Arc;

use kimi_llm::Message;
use kimi_wire::message::ContentPart;
use tokio_util::sync::CancellationToken;

use crate::approval::ApprovalSource;
use crate::context::Context;
use crate::reminders::Reminders;
use crate::soul::{Soul, SoulParts, TurnError, TurnOutcome, system};

/// What the model is asked to do (our own words).
const INIT_PROMPT: &str = include_str!("init_prompt.md");

impl Soul {
    pub(super) async fn init_agents_md(
        &self,
        source: &ApprovalSource,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, TurnError> {
        if self.llm.is_none() {
            return Err(TurnError::LlmNotSet);
        }
        let scratch = self.scratch_soul().await;
        let prompt = INIT_PROMPT.trim_end();
        let turn = scratch.model_turn(vec![ContentPart::text(prompt)], source, cancel);
        let report = self.nested_turn(prompt.to_owned().into(), turn).await?;
        if report.outcome != TurnOutcome::Finished {
            return Ok(report.outcome);
        }
        let Some(session) = self.session_info() else {
            return Ok(TurnOutcome::Finished);
        };
        let agents_md = crate::prompt::agents_md(&session.work_dir);
        let note = format!(
            "The user ran `/init`: the project was analyzed and `AGENTS.md` was written for agents working on it. This is what it says now:\n{agents_md}"
        );
        self.context
            .lock()
            .await
            .append(Message::user(vec![system(&note)]))?;
        Ok(TurnOutcome::Finished)
    }

    /// A soul sharing this one's model, tools, approvals, hooks, events, skills and MCP servers, with an
    /// empty context that is not written anywhere.
    async fn scratch_soul(&self) -> Soul {
        let system_prompt = self.context.lock().await.system_prompt().to_owned();
        Soul::new(SoulParts {
            llm: self.llm.clone(),
            model: self.model.clone(),
            settings: self.settings,
            context: Context::in_memory(system_prompt),
            toolset: Arc::clone(&self.toolset),
            approvals: Arc::clone(&self.approvals),
            events: self.events.clone(),
            hooks: Arc::clone(&self.hooks),
            plan: Arc::clone(self.plan_state()),
            subagent: None,
            mcp: self.mcp().cloned(),
            skills: self.skills().cloned(),
            session: None,
            notifications: None,
            reminders: Reminders::none(),
        })
    }
}
