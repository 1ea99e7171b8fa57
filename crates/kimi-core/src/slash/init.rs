//! `/init`: the model studies the project and writes `AGENTS.md` (reference `slash.py` `init`).
//!
//! The work runs as a nested turn on a scratch context (same model, tools and approvals), so the
//! exploration does not fill the session's context; afterwards the session's context gets a short note
//! with the new `AGENTS.md`.

use kimi_llm::Message;

use crate::soul::{CommandContext, TurnError, TurnOutcome, system};

/// What the model is asked to do (our own words).
const INIT_PROMPT: &str = include_str!("init_prompt.md");

/// Runs `/init`.
pub(super) async fn init_agents_md(cx: &CommandContext<'_>) -> Result<TurnOutcome, TurnError> {
    cx.require_model()?;
    let outcome = cx.scratch_turn(INIT_PROMPT.trim_end()).await?;
    if outcome != TurnOutcome::Finished {
        return Ok(outcome);
    }
    let Some(session) = cx.session() else {
        return Ok(TurnOutcome::Finished);
    };
    let agents_md = crate::prompt::agents_md(&session.work_dir);
    let note = format!(
        "The user ran `/init`: the project was analyzed and `AGENTS.md` was written for agents working on it. This is what it says now:\n{agents_md}"
    );
    cx.conversation()
        .await
        .append(Message::user(vec![system(&note)]))?;
    Ok(TurnOutcome::Finished)
}
