//! Making a soul: the one place a [`Soul`] is put together, for the root agent and for every subagent.
//! Its toolset is filled by the [`ToolFactory`]; the root agent's also gets the `Skill` tool and the MCP
//! servers' tools, and the session's skills, facts, notifications and reminders.

use std::sync::Arc;

use kimi_llm::ChatProvider;

use super::tools::{ToolFactory, ToolInputs};
use crate::context::Context;
use crate::events::SubagentIdentity;
use crate::hooks::HookEngine;
use crate::mcp::{McpManager, McpSettings, ServerConfig};
use crate::notifications::NotificationQueue;
use crate::reminders::Reminders;
use crate::skills::{SkillTool, Skills};
use crate::soul::{LoopSettings, ModelInfo, SessionInfo, Soul, SoulParts};
use crate::tool_names::ToolNames;
use crate::toolset::{OutputBudget, Toolset};

/// What a soul is made from.
pub(crate) struct Recipe<'a> {
    /// Builds its tools.
    pub factory: &'a dyn ToolFactory,
    /// Its built-in tools, resolved, in order.
    pub tools: &'a [&'static str],
    /// What texts for its model call the tools.
    pub tool_names: ToolNames,
    /// What its tools may use; its events are `inputs.events`.
    pub inputs: &'a ToolInputs,
    /// Its provider, `None` when no model is configured.
    pub llm: Option<Arc<dyn ChatProvider>>,
    /// Its model's facts.
    pub model: ModelInfo,
    /// Loop limits.
    pub settings: LoopSettings,
    /// Its (restored or new) conversation.
    pub context: Context,
    /// The session's hooks.
    pub hooks: Arc<HookEngine>,
    /// Who it is, when it is a subagent.
    pub subagent: Option<SubagentIdentity>,
    /// What only the root agent has.
    pub root: Option<RootParts>,
}

/// What only the root agent's soul is made with.
pub(crate) struct RootParts {
    /// The session's skills.
    pub skills: Arc<Skills>,
    /// The MCP servers to start, and how.
    pub mcp: (Vec<ServerConfig>, McpSettings),
    /// Session facts slash commands need.
    pub session: SessionInfo,
    /// The session's notifications.
    pub notifications: Arc<NotificationQueue>,
    /// The reminders the model is owed.
    pub reminders: Reminders,
}

/// Makes the soul `recipe` describes. The root agent's MCP servers start loading here, after the
/// built-in tools are registered, so an MCP tool can never take a built-in's name.
pub(crate) fn soul(recipe: Recipe<'_>) -> Soul {
    let Recipe {
        factory,
        tools,
        tool_names,
        inputs,
        llm,
        model,
        settings,
        context,
        hooks,
        subagent,
        root,
    } = recipe;
    let toolset = Arc::new(Toolset::new());
    toolset.set_output_budget(OutputBudget::for_session(&inputs.env.session_dir).with_tool_names(tool_names));
    factory.register(&toolset, tools, inputs);
    let mut parts = SoulParts {
        llm,
        model,
        settings,
        context,
        toolset: Arc::clone(&toolset),
        approvals: Arc::clone(&inputs.approvals),
        events: inputs.events.clone(),
        hooks,
        plan: Arc::clone(&inputs.plan),
        subagent,
        mcp: None,
        skills: None,
        session: None,
        workspace: Arc::clone(&inputs.env),
        notifications: None,
        // A subagent's commands are confined as the root agent's are, so it is told the same; plan mode
        // and afk are the root agent's business (reference).
        reminders: Reminders::for_subagent().with_tool_names(tool_names),
    };
    if let Some(root) = root {
        // After the agent's tools, and only when some skill may be loaded by the model (seeds/002).
        if let Some(tool) = SkillTool::new(Arc::clone(&root.skills)) {
            toolset.register(Arc::new(tool));
        }
        let (servers, mcp_settings) = root.mcp;
        parts.mcp = Some(McpManager::start(servers, mcp_settings, toolset));
        parts.skills = Some(root.skills);
        parts.session = Some(root.session);
        parts.notifications = Some(root.notifications);
        parts.reminders = root.reminders;
    }
    Soul::new(parts)
}
