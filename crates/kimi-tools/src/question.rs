//! Putting questions to the user through a `QuestionRequest` and waiting for the answer, for every tool
//! that asks (AskUserQuestion, EnterPlanMode, ExitPlanMode).

use kimi_core::EventSink;
use kimi_wire::message::{QuestionItem, QuestionRequest};
use kimi_wire::{NoAnswer, RequestScope, SendRequestError};
use tokio_util::sync::CancellationToken;

/// Question text to the chosen label(s), in the order the questions were asked.
pub(crate) type Answers = indexmap::IndexMap<String, String>;

/// How asking ended.
#[derive(Debug)]
pub(crate) enum Reply {
    /// At least one question was answered.
    Answered(Answers),
    /// No answer: the user dismissed the questions, the client answered with an error or went away,
    /// or the turn ended first.
    Dismissed,
    /// The request could not be sent.
    Failed,
}

/// Asks `questions` on behalf of call `tool_call_id`; the request belongs to the turn, so cancelling
/// the turn (or `cancel`) resolves it as dismissed.
pub(crate) async fn ask(
    events: &EventSink,
    tool_call_id: String,
    questions: Vec<QuestionItem>,
    cancel: &CancellationToken,
) -> Reply {
    let request = QuestionRequest {
        id: uuid::Uuid::new_v4().to_string(),
        tool_call_id,
        questions,
    };
    let reply = match events.send(request, RequestScope::Turn).await {
        Ok(reply) => reply,
        // Reference: a connection that goes away resolves open questions with no answers.
        Err(SendRequestError::Closed(_)) => return Reply::Dismissed,
        Err(e) => {
            tracing::error!(error = %e, "question request could not be sent");
            return Reply::Failed;
        }
    };
    let answer = tokio::select! {
        answer = reply.answer() => answer,
        () = cancel.cancelled() => return Reply::Dismissed,
    };
    match answer {
        Ok(answer) if !answer.answers.is_empty() => Reply::Answered(answer.answers),
        Ok(_) => Reply::Dismissed,
        Err(NoAnswer::Malformed(e)) => {
            tracing::warn!(error = %e, "malformed question answer; treating it as dismissed");
            Reply::Dismissed
        }
        Err(_) => Reply::Dismissed,
    }
}
