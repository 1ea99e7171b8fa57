//! The seam between the protocol and the agent: [`WireAgent`], which the core implements (it talks back
//! to the client through a [`crate::ClientHandle`]).
//!
//! The server owns the turn state (is a `prompt` or `replay` running?) and answers the -32000 state
//! errors itself, so an agent never sees a second concurrent prompt, and never a `steer` or `cancel`
//! without a running turn (a `steer` without one first asks [`WireAgent::writable`]). A turn the
//! agent starts itself goes through the same slot ([`crate::TurnStarter`]).

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::error_code::RpcError;
use crate::message::UserInput;
use crate::params::{
    InitializeParams, InitializeResult, PromptResult, ReplayResult, SetPlanModeResult, SteerResult,
};

/// What the agent must do for each method. Each call runs in its own task; `prompt` and `replay` are
/// never called while another `prompt` or `replay` runs.
#[async_trait]
pub trait WireAgent: Send + Sync + 'static {
    /// `initialize`: register external tools and hook subscriptions, report what the server offers.
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult, RpcError>;
    /// `prompt`: run one turn; `cancel` fires when the client sends `cancel` or goes away.
    async fn prompt(&self, input: UserInput, cancel: CancellationToken) -> Result<PromptResult, RpcError>;
    /// `steer`: queue input for the running turn (only called while a turn runs).
    async fn steer(&self, input: UserInput) -> Result<SteerResult, RpcError>;
    /// Whether this agent may write its session now; asked before the server answers a `steer` with
    /// no turn running, so a process that may not write says why (a `steer` is a write) rather than
    /// that nothing runs. The default can always write.
    async fn writable(&self) -> Result<(), RpcError> {
        Ok(())
    }
    /// `set_plan_mode`: allowed at any time.
    async fn set_plan_mode(&self, enabled: bool) -> Result<SetPlanModeResult, RpcError>;
    /// `replay`: re-send the recorded session through the client handle.
    async fn replay(&self, cancel: CancellationToken) -> Result<ReplayResult, RpcError>;
    /// A `prompt` that is a side question (`/btw <question>`, see [`crate::side_question`]): answer it
    /// from the conversation as it stands, between `BtwBegin` and `BtwEnd`, without touching the
    /// conversation. Called whether or not a turn runs, and beside it. The default refuses (agents that
    /// have no conversation, test doubles).
    async fn side_question(&self, question: String) -> Result<PromptResult, RpcError> {
        let _ = question;
        Err(RpcError::internal(
            "Side questions are not supported by this agent",
        ))
    }
    /// The connection is closing: flush and release what the agent holds. Called once, after the
    /// running turn (if any) was cancelled.
    async fn shutdown(&self);
}
