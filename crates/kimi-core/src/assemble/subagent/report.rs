//! Running a subagent's task to its report: the turn, and once more when the report is too short.

use kimi_wire::message::UserInput;
use tokio_util::sync::CancellationToken;

use crate::soul::{Soul, TurnError, TurnOutcome};

/// A report shorter than this gets one request for more detail (reference `SUMMARY_MIN_LENGTH`).
const SUMMARY_MIN_CHARS: usize = 200;
/// What the subagent is told when its report is too short (our words).
const MORE_DETAIL_PROMPT: &str = "Your report is too short for the agent that asked you. Write it again in full: \
     what you did, what you found (with file paths, names and the technical details that matter), and \
     anything left open.";

/// How a run that gave no report ended.
pub(super) enum RunFailure {
    Cancelled,
    Failed { message: String, brief: String },
}

/// Runs the task, then asks once more if the report is too short (reference behaviour).
pub(super) async fn run_with_report(
    soul: &Soul,
    prompt: &str,
    cancel: &CancellationToken,
) -> Result<String, RunFailure> {
    let mut report = run_once(soul, prompt, cancel, "running agent").await?;
    if report.chars().count() < SUMMARY_MIN_CHARS {
        report = run_once(soul, MORE_DETAIL_PROMPT, cancel, "continuing the agent summary").await?;
    }
    Ok(report)
}

async fn run_once(
    soul: &Soul,
    prompt: &str,
    cancel: &CancellationToken,
    phase: &str,
) -> Result<String, RunFailure> {
    let failed = |message: String, brief: &str| RunFailure::Failed {
        message,
        brief: brief.to_owned(),
    };
    match soul
        .run_turn(UserInput::Text(prompt.to_owned()), cancel.child_token())
        .await
    {
        Ok(TurnOutcome::Finished) => {}
        Ok(TurnOutcome::Cancelled) => return Err(RunFailure::Cancelled),
        Ok(TurnOutcome::MaxStepsReached(n)) => {
            return Err(failed(
                format!(
                    "Max steps {n} reached when {phase}. Please try splitting the task into smaller subtasks."
                ),
                "Max steps reached",
            ));
        }
        Err(TurnError::Provider(e)) => {
            return Err(match e.status_code() {
                Some(code) => failed(
                    format!("LLM API error (HTTP {code}) when {phase}: {e}"),
                    &format!("API error ({code})"),
                ),
                None => failed(
                    format!("LLM provider error when {phase}: {e}"),
                    "LLM provider error",
                ),
            });
        }
        Err(e) => {
            return Err(failed(
                format!("Unexpected error when {phase}: {e}"),
                "Agent run error",
            ));
        }
    }
    soul.last_assistant_text().await.ok_or_else(|| {
        failed(
            "The agent did not produce a valid assistant response.".to_owned(),
            "Invalid agent result",
        )
    })
}
