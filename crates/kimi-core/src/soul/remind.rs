//! Telling the model what its modes owe it, before each model call (reference `KimiSoul._step`, "dynamic
//! injection"): the due reminders go into the context as one user message. See [`crate::reminders`].

use super::{Soul, TurnError};
use crate::reminders::{ModeFacts, PlanFacts};
use crate::sync::lock;

impl Soul {
    /// Appends the reminders due now to the context.
    pub(super) async fn remind(&self) -> Result<(), TurnError> {
        let (any, plan) = {
            let reminders = lock(&self.reminders);
            (!reminders.is_empty(), reminders.runs_plan())
        };
        if !any {
            return Ok(());
        }
        let on = plan && self.plan.is_on();
        let file = if plan { self.plan.active_file() } else { None };
        let file_exists = match &file {
            Some(path) => tokio::fs::try_exists(path).await.unwrap_or(false),
            None => false,
        };
        let afk = self.approvals.state().afk;
        let sandbox = Some(self.workspace.sandbox_info());
        let mut context = self.context.lock().await;
        let facts = ModeFacts {
            history: context.messages(),
            generation: context.generation(),
            plan: PlanFacts {
                on,
                entered: plan && self.plan.take_entered(),
                file: file.as_deref(),
                file_exists,
            },
            afk,
            sandbox: sandbox.as_ref(),
        };
        let due = lock(&self.reminders).due(&facts);
        for injection in &due {
            tracing::debug!(kind = injection.kind, "reminding the model");
        }
        if let Some(message) = crate::reminders::message(&due) {
            context.append(message)?;
        }
        Ok(())
    }
}
