//! [`CoreAgent`]: the session-level agent the wire server drives.
//!
//! It maps each method onto the [`Soul`], turns loop results into the reference's prompt results and
//! error codes, registers external tools, and keeps the session's files (`state.json`, `kimi.json`)
//! current.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use kimi_wire::message::{Event, StatusUpdate, UserInput};
use kimi_wire::params::{
    ExternalToolsResult, HooksInfo, InitializeParams, InitializeResult, PromptResult, PromptStatus,
    RejectedTool, ReplayResult, ReplayStatus, ServerCapabilities, ServerInfo, SetPlanModeResult, SteerResult,
};
use kimi_wire::{ErrorData, RpcError, WireAgent};
use tokio_util::sync::CancellationToken;

use crate::approval::ApprovalState;
use crate::events::EventSink;
use crate::recorder::{ReplayItem, WireFileReader};
use crate::session::{self, Session};
use crate::soul::{Soul, TurnError, TurnOutcome};
use crate::state::{ClientFlags, SessionState, StateFile};
use crate::toolset::ExternalTool;

/// Hook events the server supports, in the reference's order (reported by `initialize`).
pub const HOOK_EVENTS: [&str; 13] = [
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "Stop",
    "StopFailure",
    "SessionStart",
    "SessionEnd",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "Notification",
];

/// Tools only offered to clients that declared the matching capability.
const QUESTION_TOOLS: [&str; 1] = ["AskUserQuestion"];
const PLAN_TOOLS: [&str; 2] = ["EnterPlanMode", "ExitPlanMode"];

/// What the binary hands the agent besides the soul.
#[derive(Debug, Clone)]
pub struct AgentInfo {
    /// Our name and version, reported by `initialize`.
    pub server: ServerInfo,
    /// The share dir (`kimi.json` lives there).
    pub share_dir: PathBuf,
    /// The provider's User-Agent; `initialize` appends the client's name and version.
    pub user_agent: kimi_llm::UserAgent,
    /// The workspace, for the sandbox `initialize` reports (its roots follow `/add-dir`).
    pub environment: Arc<crate::state::Environment>,
    /// The model's provider signs in with an account (`oauth`): a 401 from it means the login expired.
    pub signed_in: bool,
    /// The model's provider type (`kimi`, `anthropic`, ...), named in provider errors' data.
    pub provider: String,
}

/// The agent behind one wire connection.
#[derive(Debug)]
pub struct CoreAgent {
    soul: Arc<Soul>,
    session: Session,
    info: AgentInfo,
    state: Arc<SessionState>,
    client_flags: Arc<ClientFlags>,
    initialized: AtomicBool,
    /// The approval state the session started with (flags merged with state.json). Until it changes,
    /// state.json keeps its own `yolo`: the reference persists approval only when it changes, so a
    /// one-off `--yolo` does not make every later resume auto-approve.
    approval_at_start: ApprovalState,
}

impl CoreAgent {
    /// An agent for `session`, driven through `soul`.
    pub fn new(
        soul: Arc<Soul>,
        session: Session,
        info: AgentInfo,
        state: Arc<SessionState>,
        client_flags: Arc<ClientFlags>,
    ) -> Self {
        let approval_at_start = soul.approvals().state();
        Self {
            soul,
            session,
            info,
            state,
            client_flags,
            initialized: AtomicBool::new(false),
            approval_at_start,
        }
    }

    fn register_external_tools(&self, tools: Vec<kimi_wire::params::ExternalTool>) -> ExternalToolsResult {
        let toolset = self.soul.toolset();
        judge_external_tools(
            tools,
            self.soul.events(),
            |name| toolset.find(name).is_some_and(|existing| !existing.is_external()),
            |tool| toolset.register(Arc::new(tool)),
        )
    }

    /// Writes `state.json` (the reference writes it after each turn), keeping fields we do not manage.
    /// `title` titles a session that has none (see [`crate::title`]).
    async fn save_state(&self, title: Option<String>) {
        let path = self.session.state_path();
        let (dir, wire) = (self.session.dir.clone(), self.session.wire_path());
        let approval = self.soul.approvals().state();
        let approval_changed = approval != self.approval_at_start;
        let plan_mode = self.soul.plan_mode();
        let plan_slug = self.soul.plan_slug();
        let plan_session_id = plan_slug.as_ref().map(|_| self.session.id.clone());
        let todos = self.state.todos();
        let result = tokio::task::spawn_blocking(move || {
            let mut file = StateFile::load(&path);
            if approval_changed {
                file.approval = approval;
            } else {
                // Reference (`soul/agent.py`): `--afk` is written to the session at start, `--yolo` not.
                file.approval.afk = approval.afk;
                file.approval.auto_approve_actions = approval.auto_approve_actions;
            }
            file.plan_mode = plan_mode;
            file.plan_slug = plan_slug;
            file.plan_session_id = plan_session_id;
            file.todos = todos;
            if file.custom_title.is_none() {
                file.custom_title = title;
            }
            let bytes = serde_json::to_vec_pretty(&file).unwrap_or_default();
            session::write_atomic(&path, &bytes)?;
            match &file.custom_title {
                Some(title) => crate::title::publish(&dir, &wire, title),
                None => Ok(()),
            }
        })
        .await;
        if let Ok(Err(e)) = result {
            tracing::error!(error = %e, "state.json or metadata.json not written");
        }
    }
}

#[async_trait]
impl WireAgent for CoreAgent {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult, RpcError> {
        self.soul.approvals().set_client(&params);
        let external_tools = match params.external_tools {
            Some(tools) if !tools.is_empty() => Some(self.register_external_tools(tools)),
            _ => None,
        };
        // Client hook subscriptions, and from now on HookTriggered / HookResolved events (reference: only
        // after `initialize`). Before the result, so `hooks.configured` counts them.
        self.soul
            .hooks()
            .attach_wire(params.hooks.unwrap_or_default(), self.soul.events().clone());
        // Reference: the client's name and version go into the provider's User-Agent from now on.
        if let Some(client) = &params.client {
            self.info
                .user_agent
                .set_client(&client.name, client.version.as_deref());
        }
        let capabilities = params.capabilities.unwrap_or_default();
        self.client_flags
            .set(capabilities.supports_question, capabilities.supports_plan_mode);
        let toolset = self.soul.toolset();
        for name in QUESTION_TOOLS {
            toolset.set_hidden(name, !capabilities.supports_question);
        }
        for name in PLAN_TOOLS {
            toolset.set_hidden(name, !capabilities.supports_plan_mode);
        }
        self.initialized.store(true, Ordering::SeqCst);
        Ok(InitializeResult {
            protocol_version: kimi_wire::PROTOCOL_VERSION.to_owned(),
            server: self.info.server.clone(),
            slash_commands: crate::slash::commands(self.soul.skills().map(AsRef::as_ref)),
            external_tools,
            hooks: HooksInfo {
                supported_events: HOOK_EVENTS.iter().map(|e| (*e).to_owned()).collect(),
                configured: self.soul.hooks().configured_counts().into_iter().collect(),
            },
            capabilities: ServerCapabilities {
                supports_question: true,
            },
            sandbox: Some(self.info.environment.sandbox_info()),
            // This agent exists only in the process that holds the session.
            session_held_by: None,
        })
    }

    async fn prompt(&self, input: UserInput, cancel: CancellationToken) -> Result<PromptResult, RpcError> {
        let title = crate::title::from_prompt(&input);
        let result = self.soul.run_turn(input, cancel).await;
        // Reference: only a turn that finished titles the session.
        let title = title.filter(|_| matches!(result, Ok(TurnOutcome::Finished)));
        self.save_state(title).await;
        match result {
            Ok(TurnOutcome::Finished) => Ok(PromptResult {
                status: PromptStatus::Finished,
                steps: None,
            }),
            Ok(TurnOutcome::Cancelled) => Ok(PromptResult {
                status: PromptStatus::Cancelled,
                steps: None,
            }),
            Ok(TurnOutcome::MaxStepsReached(steps)) => Ok(PromptResult {
                status: PromptStatus::MaxStepsReached,
                steps: Some(steps),
            }),
            Err(error) => Err(turn_error(error, &self.info)),
        }
    }

    async fn steer(&self, input: UserInput) -> Result<SteerResult, RpcError> {
        self.soul.steer(input);
        Ok(SteerResult::default())
    }

    async fn set_plan_mode(&self, enabled: bool) -> Result<SetPlanModeResult, RpcError> {
        self.soul.set_plan_mode(enabled);
        let update = StatusUpdate {
            plan_mode: Some(enabled),
            ..StatusUpdate::default()
        };
        // Recorded as well as streamed, so replay shows the change (reference).
        self.soul.events().emit(Event::StatusUpdate(update)).await;
        self.save_state(None).await;
        Ok(SetPlanModeResult::new(enabled))
    }

    async fn replay(&self, cancel: CancellationToken) -> Result<ReplayResult, RpcError> {
        self.soul.flush(false).await;
        replay_wire_file(&self.session.wire_path(), self.soul.events().client(), &cancel).await
    }

    async fn side_question(&self, question: String) -> Result<PromptResult, RpcError> {
        match self.soul.side_question(&question).await {
            Ok(()) => Ok(PromptResult::finished()),
            Err(error) => Err(turn_error(error, &self.info)),
        }
    }

    async fn shutdown(&self) {
        self.soul.flush(true).await;
        let has_conversation = !self.soul.is_empty().await;
        if has_conversation {
            if let Err(e) = session::remember_last_session(&self.info.share_dir, &self.session) {
                tracing::error!(error = %e, "kimi.json not updated");
            }
        } else if !self.session.resumed {
            session::remove_if_empty(&self.session, false);
        }
    }
}

/// The JSON-RPC error a failed turn answers its `prompt` with (reference codes and messages), with
/// what clients that ask for errors as data are told.
fn turn_error(error: TurnError, info: &AgentInfo) -> RpcError {
    match error {
        TurnError::LlmNotSet => RpcError::llm_not_set(),
        TurnError::LlmNotSupported {
            ref model,
            ref missing,
        } => RpcError::llm_not_supported(error.to_string(), model, missing.clone()),
        // Reference: a 401 on an account's provider asks the user to sign in again.
        TurnError::Provider(e) if info.signed_in && e.status_code() == Some(401) => RpcError::auth_expired(),
        TurnError::Provider(e) => RpcError::chat_provider(e.to_string(), e.error_data(&info.provider)),
        TurnError::SessionFile(_) => {
            RpcError::internal(error.to_string()).with_detail(ErrorData::SessionFileError)
        }
    }
}

/// `replay`: streams the recorded messages of `path` to `client`, record by record, until the end of the
/// file or `cancel`. Reads only, so a process that does not hold the session can serve it too; the
/// holder flushes its writers first.
pub async fn replay_wire_file(
    path: &std::path::Path,
    client: &kimi_wire::ClientHandle,
    cancel: &CancellationToken,
) -> Result<ReplayResult, RpcError> {
    let failed = |e: std::io::Error| {
        tracing::error!(path = %path.display(), error = %e, "replay failed");
        RpcError::internal("Replay failed").with_detail(ErrorData::ReplayFailed)
    };
    let (mut events, mut requests) = (0u64, 0u64);
    let Some(mut reader) = WireFileReader::open(path).await.map_err(failed)? else {
        return Ok(ReplayResult {
            status: ReplayStatus::Finished,
            events,
            requests,
        });
    };
    // Streamed record by record: memory holds one record plus the client's bounded outbox.
    let status = loop {
        if cancel.is_cancelled() {
            break ReplayStatus::Cancelled;
        }
        let Some(item) = reader.next_item().await.map_err(failed)? else {
            break ReplayStatus::Finished;
        };
        let is_request = matches!(item, ReplayItem::Request(_));
        // Events the client cannot parse are left out (and not counted), as in a live turn.
        let send = async {
            match item {
                ReplayItem::EventLine { kind, line } => client.send_event_line(&kind, line).await,
                ReplayItem::Event(event) => client.send_event(&event).await,
                ReplayItem::Request(request) => client.replay_request(&request).await.map(|()| true),
            }
        };
        // A client that stops reading must not keep a cancel from being answered.
        let sent = tokio::select! {
            biased;
            () = cancel.cancelled() => break ReplayStatus::Cancelled,
            sent = send => sent,
        };
        match sent {
            Err(_) => break ReplayStatus::Cancelled,
            Ok(false) => continue,
            Ok(true) => {}
        }
        if is_request {
            requests += 1;
        } else {
            events += 1;
        }
    };
    if reader.skipped() > 0 {
        tracing::warn!(
            path = %path.display(),
            skipped = reader.skipped(),
            "unreadable wire.jsonl records skipped during replay"
        );
    }
    Ok(ReplayResult {
        status,
        events,
        requests,
    })
}

/// Judges the external tools a client offers in `initialize`: a tool named like a built-in one
/// (`is_builtin`) or with an invalid parameter schema is refused, with the reference's reasons; each
/// accepted tool is handed to `accept`.
pub(crate) fn judge_external_tools(
    tools: Vec<kimi_wire::params::ExternalTool>,
    events: &EventSink,
    is_builtin: impl Fn(&str) -> bool,
    mut accept: impl FnMut(ExternalTool),
) -> ExternalToolsResult {
    let mut result = ExternalToolsResult {
        accepted: Vec::new(),
        rejected: Vec::new(),
    };
    for tool in tools {
        if is_builtin(&tool.name) {
            result.rejected.push(RejectedTool {
                name: tool.name,
                reason: "conflicts with builtin tool".into(),
            });
            continue;
        }
        match ExternalTool::new(
            &tool.name,
            &tool.description,
            serde_json::Value::Object(tool.parameters),
            events.clone(),
        ) {
            Ok(external) => {
                accept(external);
                result.accepted.push(tool.name);
            }
            Err(e) => {
                let reason = if e.0.is_empty() {
                    "invalid schema".to_owned()
                } else {
                    e.0
                };
                result.rejected.push(RejectedTool {
                    name: tool.name,
                    reason,
                });
            }
        }
    }
    result
}
