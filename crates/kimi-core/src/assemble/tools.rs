//! The tool factory: how the builder gets built-in tools without knowing them. kimi-tools implements
//! [`ToolFactory`]; the builder hands it the session's [`ToolInputs`] for each soul it makes, the root
//! agent's and every subagent's.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use kimi_llm::{ChatProvider, UserAgent};

use super::kinds::{ModelSwitch, SubagentType};
use crate::approval::ApprovalRuntime;
use crate::background::TaskManager;
use crate::config::{Config, Env};
use crate::cron::CronStore;
use crate::events::EventSink;
use crate::hooks::HookEngine;
use crate::plan::PlanMode;
use crate::soul::{LoopSettings, ModelInfo};
use crate::state::{ClientFlags, Environment, SessionState};
use crate::tool_names::ToolNames;
use crate::toolset::Toolset;

/// Builds the built-in tools an agent file names. Implemented by kimi-tools; the core only resolves
/// names through it and asks it to fill a soul's toolset.
pub trait ToolFactory: Send + Sync + std::fmt::Debug {
    /// The tool an agent file's tool entry names, as [`ToolFactory::register`] takes it (a reference
    /// path, a tool name, a profiled `kimi_code:` name), or `None` for an entry that names no tool.
    fn resolve(&self, entry: &str) -> Option<&'static str>;

    /// The name the model knows a resolved tool by (`kimi_code:Bash` → `Bash`).
    fn model_name<'a>(&self, tool: &'a str) -> &'a str;

    /// What the texts written for the model should call the tools of an agent with tool `entries`.
    fn tool_names(&self, entries: &[String]) -> ToolNames;

    /// Builds the tools `names` (resolved, in order) into `toolset` from the session's `inputs`; a
    /// tool whose conditions are not met is left out, and one that cannot be built is logged and left
    /// out.
    fn register(&self, toolset: &Toolset, names: &[&'static str], inputs: &ToolInputs);
}

/// What the built-in tools may use from the session: the pieces the builder made, and the
/// configuration the tools read their own settings from.
#[derive(Debug, Clone)]
pub struct ToolInputs {
    /// Work dir, extra dirs and the session dir.
    pub env: Arc<Environment>,
    /// Mutable session state (the todo list).
    pub state: Arc<SessionState>,
    /// What the client declared at `initialize` (question support).
    pub client: Arc<ClientFlags>,
    /// The approval runtime.
    pub approvals: Arc<ApprovalRuntime>,
    /// Where the soul's events and turn requests (questions) go.
    pub events: EventSink,
    /// The model's capabilities (`image_in`, `video_in`, `thinking`, ...).
    pub model_capabilities: BTreeSet<String>,
    /// The session's background tasks (a subagent gets [`TaskManager::for_subagent`]).
    pub tasks: TaskManager,
    /// The session's scheduled prompts; `None` when `KIMI_DISABLE_CRON` turns them off.
    pub cron: Option<Arc<CronStore>>,
    /// Plan mode, which EnterPlanMode / ExitPlanMode switch.
    pub plan: Arc<PlanMode>,
    /// What the `Agent` tool starts subagents with; `None` for a subagent's own tools (and sessions
    /// whose agent offers no subagent types), so subagents cannot start subagents.
    pub subagents: Option<Arc<Subagents>>,
    /// The configuration (`[services]`, the fetch host lists, the config file the file tools refuse).
    pub config: Arc<Config>,
    /// The process environment (the web tools' limits).
    pub process_env: Arc<Env>,
    /// Sent to the Moonshot services.
    pub user_agent: UserAgent,
    /// The share directory (the agent's own secrets live there).
    pub share_dir: PathBuf,
    /// Skill directories outside the workspace: Glob searches them, and reads there need no question.
    pub skills_dirs: Vec<PathBuf>,
}

/// The session's subagents, as the `Agent` tool starts them: its types, models and loop limits, and
/// what their souls are made from. The runner's methods are in `subagent` beside this module; the data
/// sits here because the tools' inputs carry it.
#[derive(Debug)]
pub struct Subagents {
    /// The provider subagents use unless they ask for another model (the parent's).
    pub(crate) llm: Option<Arc<dyn ChatProvider>>,
    /// The parent's model facts.
    pub(crate) model: ModelInfo,
    /// Loop limits.
    pub(crate) settings: LoopSettings,
    /// The session's hooks (SubagentStart / SubagentStop, and the subagent's own tool hooks).
    pub(crate) hooks: Arc<HookEngine>,
    /// The types, in the agent file's order.
    pub(crate) types: Vec<SubagentType>,
    /// Model aliases the config defines (a `model` argument must name one).
    pub(crate) model_aliases: BTreeSet<String>,
    /// Builds the provider of another alias.
    pub(crate) models: ModelSwitch,
    /// Builds each subagent's tools.
    pub(crate) factory: Arc<dyn ToolFactory>,
    /// The parent's tool inputs (without subagents), from which each subagent's are derived.
    pub(crate) parent: ToolInputs,
}

impl Subagents {
    /// The types, in the agent file's order.
    pub fn types(&self) -> &[SubagentType] {
        &self.types
    }

    /// The tools of subagent type `kind`, resolved, in order.
    pub fn tools(&self, kind: &SubagentType) -> Vec<&'static str> {
        resolve_all(self.factory.as_ref(), &kind.tools)
    }

    /// Whether the configuration defines model `alias`.
    pub fn has_model(&self, alias: &str) -> bool {
        self.model_aliases.contains(alias)
    }
}

/// The tools an agent file's `entries` name, resolved, in order, once each (a toolset keeps one tool
/// per name anyway); an entry that names no tool is logged and left out.
pub(crate) fn resolve_all(factory: &dyn ToolFactory, entries: &[String]) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for entry in entries {
        match factory.resolve(entry) {
            Some(name) if !names.contains(&name) => names.push(name),
            Some(_) => {}
            None => tracing::warn!(tool = %entry, "unknown tool path in agent file; skipped"),
        }
    }
    names
}
