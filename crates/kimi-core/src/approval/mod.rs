//! The approval runtime: decides whether a side-effecting call may run, asking the client when needed.
//!
//! Order of checks (reference `soul/approval.py`): yolo or afk approves; an action approved "for this
//! session" approves; otherwise an `ApprovalRequest` goes to the client and the call waits for its answer.
//! `approve_for_session` also releases every other pending request for the same action. A request that
//! can no longer be answered (turn ended, client gone, malformed answer) counts as a rejection, so nothing
//! runs that the user did not allow.
//!
//! Approval requests and their `ApprovalResponse` events travel outside the turn's recording: they are not
//! written to wire.jsonl, as in the reference.
//!
//! "Approve for session" approves the same kind of operation (seeds/001): every later request with the
//! same action. Each request's description says so, naming the action ([`describe`]), except for the
//! kinds whose text the reference fixes (its clients and tests match it) when the client does not get
//! details ([`ApprovalDetails`], decided at `initialize`); only a client that gets details is also shown
//! a tool's [`ApprovalAsk::detail_display`].

mod effect;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use kimi_wire::message::{
    ApprovalDecision, ApprovalRequest, ApprovalResponse, ApprovalSourceKind, DisplayBlock, Event,
};
use kimi_wire::params::InitializeParams;
use kimi_wire::{Answer, ClientHandle, NoAnswer, RequestScope};
use serde::{Deserialize, Serialize};

pub use details::ApprovalDetails;
pub use effect::{ApprovalAsk, Effect};

use crate::sync::lock;

mod details;

/// Where an approval request comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalSource {
    /// Foreground turn or background agent.
    pub kind: ApprovalSourceKind,
    /// One id per turn (or per background task).
    pub id: String,
    /// Set when a subagent asks.
    pub agent_id: Option<String>,
    /// The subagent's type, when a subagent asks.
    pub subagent_type: Option<String>,
}

impl ApprovalSource {
    /// A fresh source for a foreground turn.
    pub fn foreground_turn() -> Self {
        Self {
            kind: ApprovalSourceKind::ForegroundTurn,
            id: uuid::Uuid::new_v4().simple().to_string(),
            agent_id: None,
            subagent_type: None,
        }
    }
}

/// The persisted part of approval state (state.json `approval`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalState {
    /// Approve everything.
    #[serde(default)]
    pub yolo: bool,
    /// Nobody is at the keyboard: approve everything, dismiss questions.
    #[serde(default)]
    pub afk: bool,
    /// Actions approved for the rest of the session.
    #[serde(default)]
    pub auto_approve_actions: BTreeSet<String>,
}

/// The user's verdict on one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Approved,
    /// Do not run it.
    Rejected {
        /// What the user said, if anything.
        feedback: Option<String>,
    },
}

struct PendingApproval {
    action: String,
    source_id: String,
}

/// Told when a background agent starts waiting for an approval (`Some(description)`) and when it no
/// longer waits for any (`None`), with the agent's task id.
pub type WaitListener = Arc<dyn Fn(&str, Option<&str>) + Send + Sync>;

/// Shared by every tool call of a session.
pub struct ApprovalRuntime {
    client: ClientHandle,
    /// `approval_details` of the configuration.
    details_policy: ApprovalDetails,
    /// Whether requests to the connected client carry details: the policy's answer for it, set at
    /// `initialize` and read as each request is built (subagents and background agents share this
    /// runtime, so their requests follow it too).
    details: AtomicBool,
    state: Mutex<ApprovalState>,
    pending: Mutex<HashMap<String, PendingApproval>>,
    /// Keeps background tasks' `awaiting_approval` status (the session's task manager).
    background_waits: Option<WaitListener>,
}

impl std::fmt::Debug for ApprovalRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalRuntime")
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl ApprovalRuntime {
    /// A runtime starting from `state`.
    pub fn new(client: ClientHandle, state: ApprovalState) -> Self {
        Self {
            client,
            details_policy: ApprovalDetails::Never,
            details: AtomicBool::new(false),
            state: Mutex::new(state),
            pending: Mutex::new(HashMap::new()),
            background_waits: None,
        }
    }

    /// Decides with `policy` (`approval_details`) which clients get details; the default is
    /// [`ApprovalDetails::Never`].
    #[must_use]
    pub fn with_details(mut self, policy: ApprovalDetails) -> Self {
        self.details_policy = policy;
        self.details = AtomicBool::new(policy.shows_details(None));
        self
    }

    /// Decides for the client that sent `initialize` with `params` whether its requests carry details.
    pub fn set_client(&self, params: &InitializeParams) {
        let shows = self.details_policy.shows_details(Some(params));
        self.details.store(shows, Ordering::Relaxed);
    }

    /// Has `listener` (the task manager) hear of background agents' waits; none hears by default.
    #[must_use]
    pub fn with_background_waits(mut self, listener: WaitListener) -> Self {
        self.background_waits = Some(listener);
        self
    }

    /// Tells the listener about a background source's wait starting, or ending when nothing of it is
    /// pending any more.
    fn background_wait(&self, source: &ApprovalSource, waiting: Option<&str>) {
        if source.kind != ApprovalSourceKind::BackgroundAgent {
            return;
        }
        let Some(listener) = &self.background_waits else {
            return;
        };
        let still_pending = lock(&self.pending).values().any(|p| p.source_id == source.id);
        if waiting.is_some() || !still_pending {
            listener(&source.id, waiting);
        }
    }

    /// A copy of the current state (for state.json and status).
    pub fn state(&self) -> ApprovalState {
        lock(&self.state).clone()
    }

    /// Turns yolo on or off.
    pub fn set_yolo(&self, yolo: bool) {
        lock(&self.state).yolo = yolo;
    }

    /// Turns afk on or off.
    pub fn set_afk(&self, afk: bool) {
        lock(&self.state).afk = afk;
    }

    /// Decides whether the call `tool_call_id` of `sender` may do `ask`.
    pub async fn request(
        &self,
        source: &ApprovalSource,
        tool_call_id: &str,
        sender: &str,
        ask: &ApprovalAsk,
    ) -> Verdict {
        {
            let state = lock(&self.state);
            if state.yolo || state.afk || state.auto_approve_actions.contains(&ask.action) {
                return Verdict::Approved;
            }
        }
        let id = uuid::Uuid::new_v4().to_string();
        let details = self.details.load(Ordering::Relaxed);
        let request = ApprovalRequest {
            id: id.clone(),
            tool_call_id: tool_call_id.to_owned(),
            sender: sender.to_owned(),
            action: ask.action.clone(),
            description: describe(ask, details),
            display: display(ask, details),
            source_kind: Some(source.kind),
            source_id: Some(source.id.clone()),
            agent_id: source.agent_id.clone(),
            subagent_type: source.subagent_type.clone(),
            source_description: None,
        };
        lock(&self.pending).insert(
            id.clone(),
            PendingApproval {
                action: ask.action.clone(),
                source_id: source.id.clone(),
            },
        );
        self.background_wait(source, Some(&ask.description));
        let scope = match source.kind {
            ApprovalSourceKind::ForegroundTurn => RequestScope::Turn,
            ApprovalSourceKind::BackgroundAgent => RequestScope::Session,
        };
        let (decision, feedback) = match self.client.ask(&request, scope).await {
            Ok(answer) => (answer.response, answer.feedback),
            Err(why) => {
                match why {
                    NoAnswer::NotSent(e) => {
                        tracing::warn!(error = %e, "approval request could not be sent; rejecting")
                    }
                    NoAnswer::Malformed(e) => {
                        tracing::warn!(error = %e, "malformed approval answer; rejecting")
                    }
                    NoAnswer::Error(_) | NoAnswer::Abandoned(_) => {}
                }
                (ApprovalDecision::Reject, String::new())
            }
        };
        self.emit_response(&id, decision, &feedback).await;
        // Only now: a turn cancelled while the response is being emitted (a signal, EOF) drops this
        // future mid-way, and `cancel_source` must still find the request and tell the client.
        lock(&self.pending).remove(&id);
        self.background_wait(source, None);
        match decision {
            ApprovalDecision::Approve => Verdict::Approved,
            ApprovalDecision::ApproveForSession => {
                self.approve_for_session(&ask.action);
                Verdict::Approved
            }
            ApprovalDecision::Reject => Verdict::Rejected {
                feedback: (!feedback.is_empty()).then_some(feedback),
            },
        }
    }

    /// Remembers `action` and releases every other request waiting on it.
    fn approve_for_session(&self, action: &str) {
        lock(&self.state).auto_approve_actions.insert(action.to_owned());
        let others: Vec<String> = lock(&self.pending)
            .iter()
            .filter(|(_, p)| p.action == action)
            .map(|(id, _)| id.clone())
            .collect();
        for id in others {
            let answer = serde_json::json!({ "request_id": id, "response": "approve" });
            self.client.resolve_pending(&id, Answer::Result(answer));
        }
    }

    /// Rejects what a finished or cancelled turn left pending, telling the client (reference
    /// `cancel_by_source`).
    pub async fn cancel_source(&self, source_id: &str) {
        let ids: Vec<String> = {
            let mut pending = lock(&self.pending);
            let ids: Vec<String> = pending
                .iter()
                .filter(|(_, p)| p.source_id == source_id)
                .map(|(id, _)| id.clone())
                .collect();
            for id in &ids {
                pending.remove(id);
            }
            ids
        };
        for id in ids {
            self.emit_response(&id, ApprovalDecision::Reject, "").await;
        }
    }

    async fn emit_response(&self, id: &str, response: ApprovalDecision, feedback: &str) {
        let event = Event::ApprovalResponse(ApprovalResponse {
            request_id: id.to_owned(),
            response,
            feedback: feedback.to_owned(),
        });
        let _ = self.client.send_event(&event).await;
    }
}

/// Actions whose request text the reference fixes: Shell, background tasks, the file editors, MCP and
/// plugin tools.
fn has_reference_text(action: &str) -> bool {
    matches!(
        action,
        "run command"
            | "run background command"
            | "stop background task"
            | "edit file"
            | "edit file outside of working directory"
    ) || action.starts_with("mcp:")
        || action.starts_with("plugin:")
}

/// The description the client shows: the tool's, then what "approve for session" would cover.
pub fn describe(ask: &ApprovalAsk, details: bool) -> String {
    if !details && has_reference_text(&ask.action) {
        return ask.description.clone();
    }
    format!(
        "{} (approve for session covers every \"{}\" request)",
        ask.description, ask.action
    )
}

/// The blocks the client shows: the tool's, then, with details, those it shows only then.
fn display(ask: &ApprovalAsk, details: bool) -> Vec<DisplayBlock> {
    let extra = if details {
        ask.detail_display.as_slice()
    } else {
        &[]
    };
    ask.display.iter().chain(extra).cloned().collect()
}

#[cfg(test)]
mod tests;
