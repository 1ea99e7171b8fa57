//! The built-in tools of kimi-agent, and the registry that builds them by name.
//!
//! The agent file names tools by the reference's Python paths (`kimi_cli.tools.shell:Shell`);
//! [`resolve_tool_path`] maps those to tool names, [`build_tool`] builds a tool from its name and the
//! session's [`ToolDeps`], and [`DEFAULT_TOOLS`] is the default agent's list. [`Builtins`] offers all
//! of it to the core's session builder as its [`ToolFactory`]. Each tool implements
//! [`kimi_core::Tool`]: it validates its arguments and declares its effect in `plan`, and the
//! toolset asks for approval before it runs anything with a side effect.
//!
//! Layout:
//! - `shell` ([`Shell`]): one bash command, with its process-group handling in `shell/process.rs`.
//! - `todo` ([`SetTodoList`]): the session's todo list.
//! - `task` ([`TaskList`], [`TaskOutput`], [`TaskStop`]): the session's background tasks.
//! - `ask_user` ([`AskUserQuestion`]): multiple-choice questions to the user over the wire.
//! - `cron` ([`CronCreate`], [`CronList`], [`CronDelete`]): the session's scheduled prompts.
//! - [`mod@file`]: the file tools (ReadFile, ReadMediaFile, Glob, Grep, WriteFile, StrReplaceFile).
//! - [`web`]: FetchURL and SearchWeb (the latter only with `[services.moonshot_search]`).
//! - `git_diff` ([`GitDiff`]): the repository's changes, read-only (seeds/003; both agents).
//! - [`kimi_code`]: the tool set of Kimi Code (seeds/002), as adapters over the tools above, which
//!   agent files name `kimi_code:<Name>` (the built-in `kimi-code` agent).
//! - [`output`]: the output budget every tool writes through ([`output::OutputBuilder`]).
//! - [`args`]: argument checks with the reference's (pydantic's) messages.
//! - `descriptions/`: one Markdown description per tool, in our own words.
//!
//! This crate knows nothing of the agent loop, approvals or the wire beyond the types it receives in
//! [`ToolDeps`].

#![warn(missing_docs)]

mod agent;
pub mod args;
mod ask_user;
mod cron;
pub mod file;
mod git_diff;
pub mod kimi_code;
pub mod output;
mod plan;
mod question;
mod shell;
mod task;
mod todo;
pub mod web;

use std::sync::Arc;

use kimi_core::{Tool, Toolset, schema_for};
use kimi_core::{ToolFactory, ToolInputs};
use kimi_llm::ToolSpec;

pub use agent::AgentTool;
pub use ask_user::AskUserQuestion;
pub use cron::{CronCreate, CronDelete, CronList};
pub use git_diff::GitDiff;
pub use plan::{EnterPlanMode, ExitPlanMode, PlanToolDeps};
pub use shell::{Shell, find_shell};
pub use task::{TaskFormat, TaskList, TaskOutput, TaskStop};
pub use todo::SetTodoList;
pub use web::{FetchURL, SearchWeb, WebSettings};

/// What the built-in tools may use: what the session gives them, and the settings the web and file
/// tools derive from it once per soul.
#[derive(Debug, Clone)]
pub struct ToolDeps {
    /// The session's pieces and configuration.
    pub session: ToolInputs,
    /// `[services]` and the limits of the web tools.
    pub web: WebSettings,
    /// Where the file tools may read without asking beyond the workspace, and the agent's secrets.
    pub files: file::FileSettings,
}

impl ToolDeps {
    /// The tools' dependencies from what the session gives them.
    pub fn from_inputs(inputs: &ToolInputs) -> Self {
        let config = &inputs.config;
        Self {
            session: inputs.clone(),
            web: WebSettings {
                services: config.services.clone(),
                user_agent: inputs.user_agent.clone(),
                limits: web::WebLimits::from_env(|name| inputs.process_env.get(name).cloned()),
                fetch_allowed_hosts: web::HostList::new(&config.fetch_allowed_hosts),
                fetch_allow_private_hosts: web::HostList::new(&config.fetch_allow_private_hosts),
                share_dir: Some(inputs.share_dir.clone()),
            },
            files: file::FileSettings {
                read_roots: inputs
                    .skills_dirs
                    .iter()
                    .cloned()
                    .chain(std::iter::once(kimi_core::plans_dir()))
                    .collect(),
                secrets: file::SecretFiles::new(&inputs.share_dir, config.source_file.as_deref()),
            },
        }
    }

    fn plan_tool_deps(&self) -> PlanToolDeps {
        let session = &self.session;
        PlanToolDeps {
            plan: Arc::clone(&session.plan),
            approvals: Arc::clone(&session.approvals),
            client: Arc::clone(&session.client),
            events: session.events.clone(),
        }
    }
}

/// A tool name no built-in tool has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tool `{name}`")]
pub struct UnknownTool {
    /// The name asked for.
    pub name: String,
}

/// The reference's default agent's tools, in its order (`agents/default/agent.yaml`).
pub const DEFAULT_TOOLS: &[&str] = &[
    "Agent",
    "AskUserQuestion",
    "SetTodoList",
    "Shell",
    "TaskList",
    "TaskOutput",
    "TaskStop",
    "ReadFile",
    "ReadMediaFile",
    "Glob",
    "Grep",
    "WriteFile",
    "StrReplaceFile",
    "SearchWeb",
    "FetchURL",
    "ExitPlanMode",
    "EnterPlanMode",
];

/// Our tools beyond the reference, offered by the default agent after the reference's. Agent files name
/// them by tool name: the reference has no module path for them.
pub const OWN_TOOLS: &[&str] = &[cron::CREATE, cron::LIST, cron::DELETE, git_diff::NAME];

/// Reference tools we know but do not have yet; [`build_tool`] skips them (`Ok(None)`).
const NOT_YET_AVAILABLE: &[&str] = &["SendDMail", "Think"];

/// Builds the built-in tool called `name` (a kimi-code tool when it starts with
/// [`kimi_code::PREFIX`]).
///
/// `Ok(None)` means the tool does not load in this session, as the reference's `SkipThisTool`: a tool
/// whose conditions are not met (ReadMediaFile for a text-only model, SearchWeb without
/// `[services.moonshot_search]`, the web tools with `sandbox_network = false`, Agent without subagent
/// types), or a known tool we do not have yet
/// (`NOT_YET_AVAILABLE`). A name no reference tool has is an [`UnknownTool`] error.
pub fn build_tool(name: &str, deps: &ToolDeps) -> Result<Option<Arc<dyn Tool>>, UnknownTool> {
    if let Some(profiled) = name.strip_prefix(kimi_code::PREFIX) {
        return kimi_code::build_tool(profiled, deps);
    }
    let session = &deps.session;
    let tool: Arc<dyn Tool> = match name {
        agent::NAME => match &session.subagents {
            Some(subagents) => Arc::new(AgentTool::new(Arc::clone(subagents))),
            None => return Ok(None),
        },
        shell::NAME => Arc::new(Shell::new(Arc::clone(&session.env), session.tasks.clone())),
        task::LIST => Arc::new(TaskList::new(session.tasks.clone())),
        task::OUTPUT => Arc::new(TaskOutput::new(session.tasks.clone())),
        task::STOP => Arc::new(TaskStop::new(session.tasks.clone())),
        todo::NAME => Arc::new(SetTodoList::new(Arc::clone(&session.state))),
        ask_user::NAME => Arc::new(AskUserQuestion::new(
            Arc::clone(&session.approvals),
            Arc::clone(&session.client),
            session.events.clone(),
        )),
        "ReadFile" => Arc::new(file::ReadFile::new(Arc::clone(&session.env), deps.files.clone())),
        "ReadMediaFile" => match file::ReadMediaFile::new(
            Arc::clone(&session.env),
            deps.files.clone(),
            &session.model_capabilities,
        ) {
            Some(tool) => Arc::new(tool),
            // Reference: only offered to models that take images or videos.
            None => return Ok(None),
        },
        "Glob" => Arc::new(file::Glob::new(
            Arc::clone(&session.env),
            session.skills_dirs.clone(),
        )),
        "Grep" => Arc::new(file::Grep::new(Arc::clone(&session.env), deps.files.clone())),
        "WriteFile" => Arc::new(file::WriteFile::new(Arc::clone(&session.env), deps.files.clone())),
        "StrReplaceFile" => Arc::new(file::StrReplaceFile::new(
            Arc::clone(&session.env),
            deps.files.clone(),
        )),
        plan::ENTER_NAME => Arc::new(EnterPlanMode::new(deps.plan_tool_deps())),
        plan::EXIT_NAME => Arc::new(ExitPlanMode::new(deps.plan_tool_deps())),
        // `sandbox_network = false`: the model's network is off, the web tools' included.
        web::FETCH_NAME | web::SEARCH_NAME if !session.env.sandbox().allows_network() => {
            tracing::info!(tool = name, "not offered: sandbox_network = false");
            return Ok(None);
        }
        web::FETCH_NAME => Arc::new(FetchURL::new(&deps.web)),
        web::SEARCH_NAME => match SearchWeb::new(&deps.web) {
            Some(tool) => Arc::new(tool),
            // Reference: only offered when `[services.moonshot_search]` is configured.
            None => return Ok(None),
        },
        cron::CREATE | cron::LIST | cron::DELETE => {
            let Some(store) = session.cron.clone() else {
                return Ok(None);
            };
            match name {
                cron::CREATE => Arc::new(CronCreate::new(store)),
                cron::LIST => Arc::new(CronList::new(store)),
                _ => Arc::new(CronDelete::new(store)),
            }
        }
        git_diff::NAME => Arc::new(GitDiff::new(Arc::clone(&session.env))),
        _ if NOT_YET_AVAILABLE.contains(&name) => {
            tracing::debug!(tool = name, "built-in tool not available yet; skipped");
            return Ok(None);
        }
        _ => {
            return Err(UnknownTool {
                name: name.to_owned(),
            });
        }
    };
    Ok(Some(tool))
}

/// Agent-file tool paths and the tools they name: the package paths the reference's agent files use,
/// and the module paths Python would import the same classes from.
const TOOL_PATHS: &[(&str, &str)] = &[
    ("kimi_cli.tools.agent:Agent", "Agent"),
    ("kimi_cli.tools.agent:AgentTool", "Agent"),
    ("kimi_cli.tools.ask_user:AskUserQuestion", "AskUserQuestion"),
    ("kimi_cli.tools.todo:SetTodoList", "SetTodoList"),
    ("kimi_cli.tools.shell:Shell", "Shell"),
    ("kimi_cli.tools.background:TaskList", "TaskList"),
    ("kimi_cli.tools.background:TaskOutput", "TaskOutput"),
    ("kimi_cli.tools.background:TaskStop", "TaskStop"),
    ("kimi_cli.tools.file:ReadFile", "ReadFile"),
    ("kimi_cli.tools.file.read:ReadFile", "ReadFile"),
    ("kimi_cli.tools.file:ReadMediaFile", "ReadMediaFile"),
    ("kimi_cli.tools.file.read_media:ReadMediaFile", "ReadMediaFile"),
    ("kimi_cli.tools.file:Glob", "Glob"),
    ("kimi_cli.tools.file.glob:Glob", "Glob"),
    ("kimi_cli.tools.file:Grep", "Grep"),
    ("kimi_cli.tools.file.grep_local:Grep", "Grep"),
    ("kimi_cli.tools.file:WriteFile", "WriteFile"),
    ("kimi_cli.tools.file.write:WriteFile", "WriteFile"),
    ("kimi_cli.tools.file:StrReplaceFile", "StrReplaceFile"),
    ("kimi_cli.tools.file.replace:StrReplaceFile", "StrReplaceFile"),
    ("kimi_cli.tools.web:SearchWeb", "SearchWeb"),
    ("kimi_cli.tools.web.search:SearchWeb", "SearchWeb"),
    ("kimi_cli.tools.web:FetchURL", "FetchURL"),
    ("kimi_cli.tools.web.fetch:FetchURL", "FetchURL"),
    ("kimi_cli.tools.plan:ExitPlanMode", "ExitPlanMode"),
    ("kimi_cli.tools.plan.enter:EnterPlanMode", "EnterPlanMode"),
    ("kimi_cli.tools.dmail:SendDMail", "SendDMail"),
    ("kimi_cli.tools.think:Think", "Think"),
];

/// The tool an agent-file path names (`kimi_cli.tools.shell:Shell` → `Shell`), or `None` for a path no
/// built-in tool has (the reference reports those as invalid tools).
pub fn resolve_tool_path(path: &str) -> Option<&'static str> {
    TOOL_PATHS.iter().find(|(p, _)| *p == path).map(|(_, name)| *name)
}

/// What an agent file's tool entry names, as [`build_tool`] takes it: a reference path
/// (`kimi_cli.tools.shell:Shell` → `Shell`), a tool name of the default agent or of ours (`Shell`,
/// `CronCreate`, `git_diff`), or a kimi-code tool (`kimi_code:Bash`, kept as it is). `None` for an entry
/// that names no built-in tool.
pub fn resolve_entry(entry: &str) -> Option<&'static str> {
    resolve_tool_path(entry).or_else(|| {
        DEFAULT_TOOLS
            .iter()
            .chain(OWN_TOOLS)
            .chain(kimi_code::TOOLS)
            .find(|name| **name == entry)
            .copied()
    })
}

/// The name the model knows a resolved tool by (`kimi_code:Bash` → `Bash`).
pub fn model_name(tool: &str) -> &str {
    tool.strip_prefix(kimi_code::PREFIX).unwrap_or(tool)
}

/// What the texts written for the model (reminders, the output budget's marker) should call the tools,
/// for an agent with tool `entries`: the kimi-code profile's names when it uses that profile.
pub fn tool_names(entries: &[String]) -> kimi_core::ToolNames {
    let kimi_code = entries
        .iter()
        .filter_map(|entry| resolve_entry(entry))
        .any(|tool| tool.starts_with(kimi_code::PREFIX));
    if kimi_code {
        kimi_code::NAMES
    } else {
        kimi_core::ToolNames::REFERENCE
    }
}

/// The built-in tools, as the session builder makes them ([`ToolFactory`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Builtins;

impl ToolFactory for Builtins {
    fn resolve(&self, entry: &str) -> Option<&'static str> {
        resolve_entry(entry)
    }

    fn model_name<'a>(&self, tool: &'a str) -> &'a str {
        model_name(tool)
    }

    fn tool_names(&self, entries: &[String]) -> kimi_core::ToolNames {
        tool_names(entries)
    }

    fn register(&self, toolset: &Toolset, names: &[&'static str], inputs: &ToolInputs) {
        let deps = ToolDeps::from_inputs(inputs);
        for &name in names {
            match build_tool(name, &deps) {
                Ok(Some(tool)) => toolset.register(tool),
                Ok(None) => tracing::debug!(tool = name, "tool declined to load"),
                Err(e) => tracing::warn!(tool = name, error = %e, "tool not built"),
            }
        }
    }
}

/// A tool's spec from its name, description and argument type.
pub(crate) fn tool_spec<T: schemars::JsonSchema>(name: &str, description: impl Into<String>) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: description.into(),
        parameters: schema_for::<T>(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kimi_core::EventSink;
    use kimi_core::PlanMode;
    use kimi_core::{ApprovalRuntime, ApprovalState};
    use kimi_core::{ClientFlags, Environment, SessionState};
    use kimi_wire::testing::FakeClient;
    use pretty_assertions::assert_eq;
    use std::collections::BTreeSet;

    fn deps(client: &FakeClient, tasks: &crate::task::testing::Tasks) -> ToolDeps {
        let dir = std::env::temp_dir();
        ToolDeps {
            session: ToolInputs {
                env: Arc::new(Environment::new(dir.clone(), Vec::new(), dir.clone())),
                state: Arc::new(SessionState::default()),
                client: Arc::new(ClientFlags::default()),
                approvals: Arc::new(ApprovalRuntime::new(
                    client.handle.clone(),
                    ApprovalState::default(),
                )),
                events: EventSink::new(client.handle.clone(), None),
                model_capabilities: BTreeSet::new(),
                tasks: tasks.manager.clone(),
                cron: None,
                plan: Arc::new(PlanMode::new(false, None, std::env::temp_dir())),
                subagents: None,
                config: Arc::new(kimi_core::Config::default()),
                process_env: Arc::default(),
                user_agent: kimi_llm::UserAgent::ours(),
                share_dir: dir,
                skills_dirs: Vec::new(),
            },
            web: WebSettings::default(),
            files: crate::file::FileSettings::default(),
        }
    }

    #[tokio::test]
    async fn builds_what_exists_and_skips_the_rest() {
        let client = FakeClient::start();
        let tasks = crate::task::testing::Tasks::new();
        let deps = deps(&client, &tasks);
        let mut built = Vec::new();
        for name in DEFAULT_TOOLS {
            if let Some(tool) = build_tool(name, &deps).unwrap() {
                assert_eq!(tool.spec().name, *name);
                assert!(!tool.spec().description.is_empty());
                built.push(tool.spec().name.clone());
            }
        }
        assert_eq!(
            built,
            [
                "AskUserQuestion",
                "SetTodoList",
                "Shell",
                "TaskList",
                "TaskOutput",
                "TaskStop",
                "ReadFile",
                "Glob",
                "Grep",
                "WriteFile",
                "StrReplaceFile",
                "FetchURL",
                "ExitPlanMode",
                "EnterPlanMode"
            ]
        );
        assert!(build_tool("Think", &deps).unwrap().is_none());
        // SearchWeb only with a search service.
        assert!(build_tool("SearchWeb", &deps).unwrap().is_none());
        let mut with_search = deps.clone();
        with_search.web.services.moonshot_search = Some(kimi_core::ServiceConfig {
            base_url: "http://127.0.0.1:9/search".into(),
            api_key: kimi_core::Secret::new("key"),
            custom_headers: None,
            oauth: None,
        });
        let search = build_tool("SearchWeb", &with_search).unwrap().unwrap();
        assert_eq!(search.spec().name, "SearchWeb");
        // Scheduled prompts load only with a store (KIMI_DISABLE_CRON unset); git_diff always.
        for name in &OWN_TOOLS[..3] {
            assert!(build_tool(name, &deps).unwrap().is_none(), "{name}");
        }
        assert_eq!(
            build_tool("git_diff", &deps).unwrap().unwrap().spec().name,
            "git_diff"
        );
        let clock: Arc<dyn kimi_core::Clock> = Arc::new(kimi_core::SystemClock);
        let mut with_cron = deps.clone();
        with_cron.session.cron = Some(Arc::new(kimi_core::CronStore::in_memory(clock)));
        for name in OWN_TOOLS {
            let tool = build_tool(name, &with_cron).unwrap().unwrap();
            assert_eq!(tool.spec().name, *name);
        }
        assert_eq!(
            build_tool("Nope", &deps).unwrap_err(),
            UnknownTool { name: "Nope".into() }
        );
        assert_eq!(
            UnknownTool { name: "Nope".into() }.to_string(),
            "unknown tool `Nope`"
        );
    }

    #[tokio::test]
    async fn the_kimi_code_profile_builds_every_tool_under_its_own_name() {
        let client = FakeClient::start();
        let tasks = crate::task::testing::Tasks::new();
        let clock: Arc<dyn kimi_core::Clock> = Arc::new(kimi_core::SystemClock);
        let mut deps = deps(&client, &tasks);
        deps.session.cron = Some(Arc::new(kimi_core::CronStore::in_memory(clock)));
        deps.session.model_capabilities = ["image_in".to_owned()].into();
        deps.web.services.moonshot_search = Some(kimi_core::ServiceConfig {
            base_url: "http://127.0.0.1:9/search".into(),
            api_key: kimi_core::Secret::new("key"),
            custom_headers: None,
            oauth: None,
        });
        let mut built = Vec::new();
        for key in kimi_code::TOOLS {
            assert_eq!(resolve_entry(key), Some(*key));
            let Some(tool) = build_tool(key, &deps).unwrap() else {
                built.push(format!("({key} not loaded)"));
                continue;
            };
            let spec = tool.spec();
            assert_eq!(spec.name, model_name(key), "{key}");
            // Only the profile's own tools are named to the model.
            for reference in [
                "ReadFile",
                "WriteFile",
                "StrReplaceFile",
                "SetTodoList",
                "SearchWeb",
                "`Shell`",
            ] {
                assert!(
                    !spec.description.contains(reference),
                    "{key} mentions {reference}"
                );
            }
            built.push(spec.name.clone());
        }
        assert_eq!(
            built,
            [
                "(kimi_code:Agent not loaded)",
                "AskUserQuestion",
                "TodoList",
                "Bash",
                "TaskList",
                "TaskOutput",
                "TaskStop",
                "Read",
                "ReadMediaFile",
                "Glob",
                "Grep",
                "Write",
                "Edit",
                "WebSearch",
                "FetchURL",
                "EnterPlanMode",
                "ExitPlanMode",
                "CronCreate",
                "CronList",
                "CronDelete",
            ]
        );
        assert_eq!(
            build_tool("kimi_code:Shell", &deps).unwrap_err(),
            UnknownTool {
                name: "kimi_code:Shell".into()
            }
        );
        assert_eq!(resolve_entry("kimi_code:Shell"), None);
        assert_eq!(resolve_entry("Bash"), None);
        assert_eq!(resolve_entry("git_diff"), Some("git_diff"));
        assert_eq!(tool_names(&["kimi_code:Read".to_owned()]), kimi_code::NAMES);
        assert_eq!(
            tool_names(&["kimi_cli.tools.file:ReadFile".to_owned()]),
            kimi_core::ToolNames::REFERENCE
        );
    }

    #[test]
    fn every_path_names_a_known_tool() {
        for (path, name) in TOOL_PATHS {
            assert_eq!(resolve_tool_path(path), Some(*name));
            assert!(
                DEFAULT_TOOLS.contains(name) || NOT_YET_AVAILABLE.contains(name),
                "{path} names an unlisted tool"
            );
        }
        assert_eq!(resolve_tool_path("kimi_cli.tools.shell:Shell"), Some("Shell"));
        assert_eq!(
            resolve_tool_path("kimi_cli.tools.plan.enter:EnterPlanMode"),
            Some("EnterPlanMode")
        );
        assert_eq!(resolve_tool_path("kimi_cli.tools.shell:Bash"), None);
        assert_eq!(resolve_tool_path("Shell"), None);
    }

    #[test]
    fn every_default_tool_has_a_path() {
        for name in DEFAULT_TOOLS {
            assert!(
                TOOL_PATHS.iter().any(|(_, n)| n == name),
                "{name} has no agent-file path"
            );
        }
    }
}
