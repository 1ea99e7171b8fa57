//! What a call would do, as the approval runtime judges it: a tool declares its [`Effect`] when it plans a
//! call, and a side effect carries the [`ApprovalAsk`] put to the user.

use std::path::PathBuf;

use kimi_wire::message::DisplayBlock;

/// What running a call would do to the world outside the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Reads only; runs without asking and may run concurrently with other read-only calls.
    ReadOnly,
    /// Changes something; runs only when approved (or auto-approved).
    SideEffect(ApprovalAsk),
}

impl Effect {
    /// The question to put to the user before the call runs, if any.
    pub fn approval(&self) -> Option<&ApprovalAsk> {
        match self {
            Self::ReadOnly => None,
            Self::SideEffect(ask) => Some(ask),
        }
    }
}

/// The approval question a side-effecting call puts to the user, in the reference's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalAsk {
    /// Stable key for "approve for this session" (e.g. `run command`, `edit file`).
    pub action: String,
    /// One line for the user (e.g. ``Run command `ls` ``).
    pub description: String,
    /// What to show (a shell block, a diff).
    pub display: Vec<DisplayBlock>,
    /// What to show after `display` only to a client that gets approval details (an MCP call's
    /// arguments: the reference shows none, and its clients match its empty `display`).
    pub detail_display: Vec<DisplayBlock>,
    /// Files the call writes; plan mode only allows the plan file.
    pub writes: Vec<PathBuf>,
}
