//! The agent core of kimi-agent: the turn/step loop, context, toolset, approval runtime, session files
//! and configuration.
//!
//! Layout:
//! - [`soul`]: the agent loop ([`soul::Soul::run_turn`]).
//! - [`toolset`]: the tool registry and the call pipeline; [`approval`]: the approval runtime.
//! - [`context`]: the conversation and `context.jsonl`; [`recorder`]: the single-writer session files.
//! - [`events`]: where events go (client and `wire.jsonl`).
//! - [`session`]: session directories, `kimi.json`, `state.json`; [`title`]: the session title;
//!   [`session_lock`]: one writer per session; [`session_gate`]: serving a session this process may
//!   not hold; [`session_cassette`]: a cassette rebuilt from a session's files.
//! - [`assemble`]: the composition root: builds the session the binary serves from its options, the
//!   configuration and a tool factory, and every subagent's soul.
//! - [`runtime`]: [`runtime::CoreAgent`], the [`kimi_wire::WireAgent`] the binary serves.
//! - [`config`], [`paths`]: configuration and well-known paths.
//! - [`btw`]: side questions (`/btw`), answered beside the running turn.
//! - [`slash`]: slash commands; [`skills`]: skills (discovery, `/skill:`, `/flow:`, the `Skill` tool).
//! - [`mcp`]: tools from MCP servers (rmcp), their loading and status.
//! - [`cron`]: scheduled prompts (cron jobs), their store and the scheduler that fires them as turns.
//! - [`background`]: background tasks; [`notifications`]: what the model and client hear about them;
//!   [`procgroup`]: stopping process groups; [`child_env`]: the environment every child gets.
//! - [`reminders`]: what each mode owes the model (plan mode, afk), told in system reminders;
//!   [`plan`]: plan mode's switch and plan file.
//! - [`private_files`]: the share directory's modes (0700 directories, 0600 files).
//! - [`sync`]: locks that a panic elsewhere does not make unusable.
//! - [`auth`]: signing in to a Kimi account (`login`, `logout`) and sending its tokens.
//! - [`sandbox`]: kernel confinement of the model's commands (Landlock, a network namespace).
//!
//! The core knows the protocol only through `kimi_wire`'s types and [`kimi_wire::ClientHandle`].

#![warn(missing_docs)]

pub mod agent_spec;
pub mod approval;
pub mod assemble;
pub mod auth;
pub mod background;
pub mod btw;
pub mod child_env;
pub mod config;
pub mod context;
pub mod cron;
pub mod events;
pub mod guardian;
pub mod hooks;
pub mod llm;
pub mod mcp;
pub mod notifications;
pub mod paths;
pub mod plan;
pub mod private_files;
pub mod procgroup;
pub mod prompt;
pub mod recorder;
pub mod reminders;
pub mod runtime;
pub mod sandbox;
pub mod session;
pub mod session_cassette;
pub mod session_gate;
pub mod session_lock;
pub mod skills;
pub mod slash;
pub mod soul;
pub mod state;
pub mod subagent;
pub mod sync;
pub mod text;
pub mod title;
pub mod tool_names;
pub mod toolset;
pub mod workspace;

/// The Kimi Code CLI release whose behaviour (flags, protocol, files) kimi-agent implements. Clients
/// gate on it (`info`), and the Kimi account server is told it (`X-Msh-Version`).
pub const KIMI_CLI_VERSION: &str = "1.49.0";
