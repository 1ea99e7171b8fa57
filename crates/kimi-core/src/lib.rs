//! The agent core of kimi-agent: the turn/step loop, context, toolset, approval runtime, session files
//! and configuration.
//!
//! Layout (private modules; what other crates use is re-exported below, in one list):
//! - `soul`: the agent loop (`soul::Soul::run_turn`).
//! - `toolset`: the tool registry and the call pipeline; `approval`: the approval runtime.
//! - `context`: the conversation and `context.jsonl`; `recorder`: the single-writer session files.
//! - `events`: where events go (client and `wire.jsonl`).
//! - `session`: session directories, `kimi.json`, `state.json`; `title`: the session title;
//!   `session_lock`: one writer per session; `session_gate`: serving a session this process may
//!   not hold; `session_cassette`: a cassette rebuilt from a session's files.
//! - `assemble`: the composition root: builds the session the binary serves from its options, the
//!   configuration and a tool factory, and every subagent's soul.
//! - `runtime`: `runtime::CoreAgent`, the `kimi_wire::WireAgent` the binary serves.
//! - `config`, `paths`: configuration and well-known paths.
//! - `btw`: side questions (`/btw`), answered beside the running turn.
//! - `slash`: slash commands; `skills`: skills (discovery, `/skill:`, `/flow:`, the `Skill` tool).
//! - `mcp`: tools from MCP servers (rmcp), their loading and status.
//! - `cron`: scheduled prompts (cron jobs), their store and the scheduler that fires them as turns.
//! - `background`: background tasks; `notifications`: what the model and client hear about them;
//!   `procgroup`: stopping process groups; `child_env`: the environment every child gets.
//! - `reminders`: what each mode owes the model (plan mode, afk), told in system reminders;
//!   `plan`: plan mode's switch and plan file.
//! - `private_files`: the share directory's modes (0700 directories, 0600 files).
//! - `sync`: locks that a panic elsewhere does not make unusable.
//! - `auth`: signing in to a Kimi account (`login`, `logout`) and sending its tokens.
//! - `sandbox`: kernel confinement of the model's commands (Landlock, a network namespace).
//!
//! The core knows the protocol only through `kimi_wire`'s types and `kimi_wire::ClientHandle`.

#![warn(missing_docs)]

mod agent_spec;
mod approval;
mod assemble;
mod auth;
mod background;
mod btw;
pub mod child_env;
mod config;
mod context;
mod cron;
mod events;
pub mod guardian;
mod hooks;
mod llm;
mod mcp;
mod notifications;
pub mod paths;
mod plan;
pub mod private_files;
pub mod procgroup;
mod prompt;
mod recorder;
mod reminders;
mod runtime;
mod sandbox;
mod session;
mod session_cassette;
mod session_gate;
mod session_lock;
mod skills;
mod slash;
mod soul;
mod state;
mod subagent;
pub mod sync;
mod text;
mod title;
mod tool_names;
mod toolset;
mod workspace;

// What other crates use, and nothing else: the modules above are private, so this list is the crate's
// public face. Function namespaces that read best with their module's name stay public modules.
pub use agent_spec::{AgentSpec, KIMI_CODE_AGENT};
pub use approval::{ApprovalAsk, ApprovalRuntime, ApprovalSource, ApprovalState, Effect};
pub use assemble::{
    AgentRequest, RunOptions, Subagents, ToolFactory, ToolInputs, sandbox_policy, session as assemble,
};
pub use auth::client::device_headers;
pub use auth::{account, service_key};
pub use background::{
    BashTaskRequest, OwnerRole, TaskKind, TaskManager, TaskRuntime, TaskSpec, TaskStatus, TaskView,
    agent_lines, format_task, format_task_list,
};
pub use config::load::{from_text as config_from_text, parse_file_text as parse_config_file_text};
pub use config::{
    BackgroundConfig, Capability, Config, ConfigSource, ProviderType, Secret, ServiceConfig, Services,
    load_in as load_config_in, process_env,
};
pub use cron::store::iso as cron_time;
pub use cron::{Clock, CronStore, JobView, ManualClock, NotFound as CronJobNotFound, SystemClock};
pub use events::EventSink;
pub use hooks::HookEngine;
pub use llm::PROVIDER_TYPES;
pub use mcp::{
    Connection, DEFAULT_CONNECT_TIMEOUT as MCP_CONNECT_TIMEOUT, ServerConfig, Transport,
    authorize as mcp_authorize, config as mcp_config, discover as mcp_discover, oauth as mcp_oauth,
};
pub use notifications::NotificationQueue;
pub use plan::{PlanMode, plans_dir};
pub use recorder::{ReplayItem, WireFileReader, WireRecorder};
pub use sandbox::{CommandSandbox, Sandbox, SandboxMode, spawner};
pub use session::canonical_work_dir;
pub use session_cassette::from_session as cassette_from_session;
pub use state::{ClientFlags, Environment, SessionState};
pub use tool_names::ToolNames;
pub use toolset::{
    Access, CallContext, CallKey, DedupTracker, Dispatch, OutputBudget, Plan, Tool, Toolset, UserRejection,
    parse_args, schema_for,
};

/// The Kimi Code CLI release whose behaviour (flags, protocol, files) kimi-agent implements. Clients
/// gate on it (`info`), and the Kimi account server is told it (`X-Msh-Version`).
pub const KIMI_CLI_VERSION: &str = "1.49.0";
