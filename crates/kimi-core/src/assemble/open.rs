//! Opening the session for writing, once this process holds its lock: the recorder, approvals,
//! background tasks, cron jobs, notifications, hooks, the tools and the root agent's soul.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use kimi_llm::{ChatProvider, UserAgent};
use kimi_wire::params::ServerInfo;
use kimi_wire::{ClientHandle, TurnStarter};

use super::held::HeldSession;
use super::kinds::SubagentType;
use super::options::RunOptions;
use super::soul::{Recipe, RootParts};
use super::start::{clamp_u32, model_switch};
use super::tools::{Subagents, ToolFactory, ToolInputs};
use crate::agent_spec::AgentSpec;
use crate::approval::{ApprovalDetails, ApprovalRuntime, ApprovalState, WaitListener};
use crate::background::{TaskEvent, TaskManager};
use crate::config::{Config, Env, HookEvent};
use crate::context::Context;
use crate::events::EventSink;
use crate::hooks::{HookEngine, input as hook_input};
use crate::llm::ProviderOptions;
use crate::mcp::{McpSettings, ServerConfig};
use crate::notifications::{NotificationQueue, Sink, ids_in_history};
use crate::plan::PlanMode;
use crate::recorder::WireRecorder;
use crate::reminders::Reminders;
use crate::runtime::{AgentInfo, CoreAgent};
use crate::sandbox::Sandbox;
use crate::session::{self, Session};
use crate::session_gate::{OpenError, SessionOpener};
use crate::session_lock::SessionLock;
use crate::skills::Skills;
use crate::soul::{LoopSettings, ModelInfo, RalphLoop, RetryBackoff, SessionInfo};
use crate::state::{ClientFlags, Environment, SessionState, StateFile};

/// Everything needed to open the session for writing, gathered at start; used once this process holds
/// the session's lock (at start, or later when the holder exits).
#[derive(Debug)]
pub struct Opener {
    pub(super) options: RunOptions,
    pub(super) config: Arc<Config>,
    pub(super) env: Arc<Env>,
    pub(super) share_dir: PathBuf,
    pub(super) client: ClientHandle,
    pub(super) turns: TurnStarter,
    pub(super) factory: Arc<dyn ToolFactory>,
    pub(super) llm: Option<Arc<dyn ChatProvider>>,
    pub(super) model: ModelInfo,
    pub(super) provider_options: ProviderOptions,
    pub(super) user_agent: UserAgent,
    pub(super) spec: AgentSpec,
    pub(super) prompt_template: String,
    pub(super) tools: Vec<&'static str>,
    pub(super) skills: Arc<Skills>,
    pub(super) mcp_servers: Vec<ServerConfig>,
    pub(super) server_info: ServerInfo,
    /// The model's provider signs in with a Kimi account (`login`), so `info` can say so.
    pub(super) signed_in: bool,
    /// How the model's commands and the file tools' writes are confined.
    pub(super) sandbox: Arc<Sandbox>,
    /// The model's provider type, named in provider errors' data.
    pub(super) provider_type: String,
}

#[async_trait]
impl SessionOpener for Opener {
    type Held = HeldSession;

    async fn open(&self, session: Session, lock: SessionLock) -> Result<Arc<HeldSession>, OpenError> {
        open_session(self, session, lock).await
    }
}

/// Builds everything that writes `session`, which this process holds by `lock`.
async fn open_session(
    opener: &Opener,
    session: Session,
    lock: SessionLock,
) -> Result<Arc<HeldSession>, OpenError> {
    let Opener {
        options,
        config,
        env,
        share_dir,
        client,
        turns,
        factory,
        llm,
        model,
        provider_options,
        user_agent,
        spec,
        prompt_template,
        tools,
        skills,
        mcp_servers,
        server_info,
        signed_in,
        sandbox,
        provider_type,
    } = opener;
    let state = StateFile::load(&session.state_path());
    let recorder = Arc::new(WireRecorder::open(&session.wire_path(), Some(client)).await);
    let events = EventSink::new(client.clone(), Some(recorder));
    let approval_state = ApprovalState {
        yolo: config.yolo(options.yolo) || state.approval.yolo,
        afk: options.afk || state.approval.afk,
        auto_approve_actions: state.approval.auto_approve_actions.clone(),
    };
    // Extra directories: the session's, then `--add-dir`'s; kept in state.json as the reference does.
    let start_dirs =
        crate::workspace::start_dirs(&state.additional_dirs, &options.add_dirs, &session.work_dir);
    if start_dirs.changed {
        let mut file = StateFile::load(&session.state_path());
        file.additional_dirs = start_dirs.dirs.iter().map(|d| d.display().to_string()).collect();
        let bytes = serde_json::to_vec_pretty(&file).map_err(|e| format!("state.json: {e}"))?;
        if let Err(e) = session::write_atomic(&session.state_path(), &bytes) {
            tracing::error!(error = %e, "state.json not written with the additional directories");
        }
    }
    let environment = Arc::new(
        Environment::new(
            session.work_dir.clone(),
            start_dirs.dirs.clone(),
            session.dir.clone(),
        )
        .with_sandbox(Arc::clone(sandbox)),
    );
    let session_state = Arc::new(SessionState::new(state.todos.clone()));
    let plan = Arc::new(PlanMode::new(
        config.plan_mode(options.plan) || state.plan_mode,
        state.plan_slug.clone(),
        crate::plan::plans_dir(),
    ));
    let client_flags = Arc::new(ClientFlags::default());
    // Scheduled prompts: jobs kept in the session directory, fired by a scheduler started below.
    let cron = (!crate::cron::is_disabled(env)).then(|| {
        Arc::new(crate::cron::CronStore::load(
            &session.dir,
            crate::cron::clock::from_env(env),
        ))
    });
    let notifications = Arc::new(NotificationQueue::open(&session.dir));
    let tasks = TaskManager::open(
        &session.dir,
        &session.id,
        config.background.clone(),
        Arc::clone(&notifications),
    );
    let approvals = Arc::new(
        ApprovalRuntime::new(client.clone(), approval_state)
            .with_details(ApprovalDetails::from(config.approval_details))
            .with_background_waits(approval_waits(&tasks)),
    );
    let base_vars =
        crate::prompt::builtin_vars(&session.work_dir, &start_dirs.dirs, &skills.prompt_listing());
    let mut vars = base_vars.clone();
    vars.extend(spec.system_prompt_args.clone());
    let system_prompt = crate::prompt::render(prompt_template, &vars);
    let context = Context::open(&session.context_path(), system_prompt, Some(client)).await;
    // What the model was already told (in this session's history) is not told again.
    notifications.ack_all(Sink::Llm, &ids_in_history(context.messages()));

    let settings = loop_settings(config, options);
    // A hook's relative program is the config file's neighbour, never the work dir's.
    let config_dir = config.source_file.as_deref().and_then(std::path::Path::parent);
    let hooks = Arc::new(
        HookEngine::new(config.hooks.clone(), session.work_dir.clone(), session.id.clone())
            .with_config_dir(config_dir),
    );
    let inputs = ToolInputs {
        env: Arc::clone(&environment),
        state: Arc::clone(&session_state),
        client: Arc::clone(&client_flags),
        approvals,
        events,
        model_capabilities: model.capabilities.clone(),
        tasks: tasks.clone(),
        cron: cron.clone(),
        plan,
        subagents: None,
        config: Arc::clone(config),
        process_env: Arc::clone(env),
        user_agent: user_agent.clone(),
        share_dir: share_dir.clone(),
        // Reference: Glob may also look into skill directories outside the workspace.
        skills_dirs: skills
            .roots()
            .iter()
            .filter(|root| !root.starts_with(&session.work_dir))
            .cloned()
            .collect(),
    };
    let types = subagent_types(spec, &base_vars);
    // The `Agent` tool is offered only when the agent file names subagent types.
    let subagents = (!types.is_empty()).then(|| {
        Arc::new(Subagents {
            llm: llm.clone(),
            model: model.clone(),
            settings,
            hooks: Arc::clone(&hooks),
            types,
            model_aliases: config.models.keys().cloned().collect(),
            models: model_switch(config, env, provider_options),
            factory: Arc::clone(factory),
            parent: inputs.clone(),
        })
    });
    let inputs = ToolInputs { subagents, ..inputs };

    let source = if session.resumed { "resume" } else { "startup" };
    let _ = hooks
        .trigger(HookEvent::SessionStart, source, hook_input::session_start(source))
        .await;
    // What the model's texts call its tools: the kimi-code agent's are `Read`, `Write`, `Edit`, ...
    let tool_names = factory.tool_names(&spec.effective_tools());
    let soul = Arc::new(super::soul::soul(Recipe {
        factory: factory.as_ref(),
        tools,
        tool_names,
        inputs: &inputs,
        llm: llm.clone(),
        model: model.clone(),
        settings,
        context,
        hooks: Arc::clone(&hooks),
        subagent: None,
        root: Some(RootParts {
            skills: Arc::clone(skills),
            mcp: (
                mcp_servers.clone(),
                McpSettings {
                    tool_call_timeout: config.mcp.client.tool_call_timeout(),
                    tool_names: config.mcp_tool_names,
                    share_dir: share_dir.clone(),
                },
            ),
            session: SessionInfo {
                id: session.id.clone(),
                work_dir: session.work_dir.clone(),
                share_dir: share_dir.clone(),
                env: Arc::clone(&environment),
            },
            notifications,
            reminders: Reminders::for_root(!config.skip_afk_prompt_injection).with_tool_names(tool_names),
        }),
    }));
    let info = AgentInfo {
        server: server_info.clone(),
        share_dir: share_dir.clone(),
        user_agent: user_agent.clone(),
        signed_in: *signed_in,
        environment,
        provider: provider_type.clone(),
    };
    let mcp = soul.mcp().cloned();
    let agent = Arc::new(CoreAgent::new(soul, session, info, session_state, client_flags));
    let scheduler =
        cron.map(|store| crate::cron::CronScheduler::spawn(store, turns.clone(), Arc::clone(&agent) as _));
    Ok(Arc::new(HeldSession {
        agent,
        scheduler: Mutex::new(scheduler),
        mcp,
        hooks,
        tasks,
        lock: Mutex::new(Some(lock)),
    }))
}

/// A background agent waiting for an approval shows as `awaiting_approval`, as in the reference.
fn approval_waits(tasks: &TaskManager) -> WaitListener {
    let tasks = tasks.clone();
    Arc::new(move |task: &str, waiting: Option<&str>| {
        let event = match waiting {
            Some(reason) => TaskEvent::AwaitApproval {
                reason: reason.to_owned(),
            },
            None => TaskEvent::Resume,
        };
        if let Err(e) = tasks.record(task, event) {
            tracing::debug!(task, error = %e, "approval wait not recorded");
        }
    })
}

/// The loop limits: the flags over `[loop_control]`.
fn loop_settings(config: &Config, options: &RunOptions) -> LoopSettings {
    let loop_control = &config.loop_control;
    LoopSettings {
        max_steps_per_turn: clamp_u32(
            options
                .max_steps_per_turn
                .unwrap_or(loop_control.max_steps_per_turn),
        ),
        max_retries_per_step: clamp_u32(
            options
                .max_retries_per_step
                .unwrap_or(loop_control.max_retries_per_step),
        ),
        reserved_context_size: loop_control.reserved_context_size,
        compaction_trigger_ratio: loop_control.compaction_trigger_ratio,
        retry_backoff: RetryBackoff::from_env_value(
            std::env::var("KIMI_AGENT_RETRY_BACKOFF_SCALE").ok().as_deref(),
        ),
        ralph: RalphLoop::from_config(
            options
                .max_ralph_iterations
                .unwrap_or(loop_control.max_ralph_iterations),
        ),
    }
}

/// The subagent types the agent file offers. A type whose agent file does not load is left out
/// (logged), so one broken file does not take the others down.
fn subagent_types(spec: &AgentSpec, vars: &std::collections::BTreeMap<String, String>) -> Vec<SubagentType> {
    spec.subagents
        .iter()
        .filter_map(|(name, sub)| {
            SubagentType::load(name, &sub.description, &sub.path, vars)
                .inspect_err(|e| tracing::warn!(subagent = %name, error = %e, "subagent type not loaded"))
                .ok()
        })
        .collect()
}
