//! [`HeldSession`]: the session as this process holds it, and how it is let go.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use kimi_wire::message::UserInput;
use kimi_wire::params::{
    InitializeParams, InitializeResult, PromptResult, ReplayResult, SetPlanModeResult, SteerResult,
};
use kimi_wire::{RpcError, WireAgent};
use tokio_util::sync::CancellationToken;

use crate::background::TaskManager;
use crate::config::HookEvent;
use crate::cron::CronScheduler;
use crate::hooks::{HookEngine, input as hook_input};
use crate::mcp::McpManager;
use crate::runtime::CoreAgent;
use crate::session_lock::SessionLock;

/// How long `SessionEnd` hooks may take at exit (reference: 5 s).
const SESSION_END_HOOK_LIMIT: Duration = Duration::from_secs(5);
/// How long background hooks may finish before they are killed at exit.
const HOOK_SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// The session as this process holds it: the agent that writes it, what runs beside the agent, and
/// the lock, let go last.
#[derive(Debug)]
pub struct HeldSession {
    pub(super) agent: Arc<CoreAgent>,
    /// Taken by [`HeldSession::close`] (no await while the mutex is held).
    pub(super) scheduler: Mutex<Option<CronScheduler>>,
    /// The root soul's MCP servers.
    pub(super) mcp: Option<Arc<McpManager>>,
    pub(super) hooks: Arc<HookEngine>,
    pub(super) tasks: TaskManager,
    /// Taken by [`HeldSession::close`], once everything that writes the session has stopped.
    pub(super) lock: Mutex<Option<SessionLock>>,
}

impl HeldSession {
    /// After the server stopped: stops what runs beside the agent, in the reference's order, then
    /// lets go of the session.
    pub(super) async fn close(&self) {
        let scheduler = take(&self.scheduler);
        if let Some(scheduler) = scheduler {
            scheduler.stop().await;
        }
        // EOF, a signal or a lost client: MCP servers (and their process groups) go first.
        if let Some(mcp) = &self.mcp {
            mcp.shutdown().await;
        }
        self.hooks.detach_wire();
        let end = self
            .hooks
            .trigger(HookEvent::SessionEnd, "exit", hook_input::session_end("exit"));
        if tokio::time::timeout(SESSION_END_HOOK_LIMIT, end).await.is_err() {
            tracing::warn!("SessionEnd hooks did not finish in time");
        }
        // Reference order: after SessionEnd; stopped unless `background.keep_alive_on_exit`.
        self.tasks.shutdown().await;
        self.hooks.shutdown(HOOK_SHUTDOWN_GRACE).await;
        if let Some(lock) = take(&self.lock) {
            lock.release();
        }
    }
}

fn take<T>(slot: &Mutex<Option<T>>) -> Option<T> {
    crate::sync::lock(slot).take()
}

#[async_trait]
impl WireAgent for HeldSession {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult, RpcError> {
        self.agent.initialize(params).await
    }

    async fn prompt(&self, input: UserInput, cancel: CancellationToken) -> Result<PromptResult, RpcError> {
        self.agent.prompt(input, cancel).await
    }

    async fn steer(&self, input: UserInput) -> Result<SteerResult, RpcError> {
        self.agent.steer(input).await
    }

    async fn set_plan_mode(&self, enabled: bool) -> Result<SetPlanModeResult, RpcError> {
        self.agent.set_plan_mode(enabled).await
    }

    async fn replay(&self, cancel: CancellationToken) -> Result<ReplayResult, RpcError> {
        self.agent.replay(cancel).await
    }

    async fn side_question(&self, question: String) -> Result<PromptResult, RpcError> {
        self.agent.side_question(question).await
    }

    async fn shutdown(&self) {
        self.agent.shutdown().await;
    }
}
