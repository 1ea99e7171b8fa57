//! Wiring a wire session together: config → model → session → tools → soul → server.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use kimi_core::agent_spec::{self, AgentSpec};
use kimi_core::approval::{ApprovalRuntime, ApprovalState};
use kimi_core::background::TaskManager;
use kimi_core::config::{self, Config, Env, HookEvent};
use kimi_core::context::Context;
use kimi_core::events::EventSink;
use kimi_core::hooks::{HookEngine, input as hook_input};
use kimi_core::mcp::{McpManager, McpSettings};
use kimi_core::notifications::{NotificationQueue, Sink, ids_in_history};
use kimi_core::plan::PlanMode;
use kimi_core::recorder::WireRecorder;
use kimi_core::runtime::{AgentInfo, CoreAgent};
use kimi_core::sandbox::{Enforcement, Sandbox, SandboxMode, SandboxPolicy};
use kimi_core::session::{self, SessionChoice};
use kimi_core::skills::{DiscoveryOptions, SkillTool, Skills};
use kimi_core::soul::{LoopSettings, RetryBackoff, SessionInfo, Soul, SoulParts};
use kimi_core::state::{ClientFlags, Environment, SessionState, StateFile};
use kimi_core::toolset::Toolset;
use kimi_wire::params::ServerInfo;
use kimi_wire::{Server, ServerConfig};

/// How long `SessionEnd` hooks may take at exit (reference: 5 s).
const SESSION_END_HOOK_LIMIT: Duration = Duration::from_secs(5);
/// How long background hooks may finish before they are killed at exit.
const HOOK_SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// Everything the command line decides for a wire session.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// `--work-dir` (default: the current directory).
    pub work_dir: Option<PathBuf>,
    /// `--session ID`.
    pub session: Option<String>,
    /// `--continue`.
    pub continue_last: bool,
    /// `--model ALIAS`.
    pub model: Option<String>,
    /// `--thinking` / `--no-thinking`.
    pub thinking: Option<bool>,
    /// `--yolo`.
    pub yolo: bool,
    /// `--afk`.
    pub afk: bool,
    /// `--plan`.
    pub plan: bool,
    /// `--max-steps-per-turn`.
    pub max_steps_per_turn: Option<u64>,
    /// `--max-retries-per-step`.
    pub max_retries_per_step: Option<u64>,
    /// `--add-dir`.
    pub add_dirs: Vec<PathBuf>,
    /// `--agent-file` (or the built-in agent when `None`).
    pub agent_file: Option<PathBuf>,
    /// `--skills-dir`s; when any are given they replace project and user skill discovery.
    pub skills_dirs: Vec<PathBuf>,
    /// MCP configuration documents, already read: `--mcp-config-file`s (or `<share>/mcp.json`), then
    /// `--mcp-config`s.
    pub mcp_sources: Vec<serde_json::Value>,
    /// `--sandbox` (else the configuration's `sandbox_mode`).
    pub sandbox: Option<SandboxMode>,
}

/// Builds the session and serves the wire protocol on stdin/stdout until the client goes away.
pub async fn serve(options: RunOptions, config: Config, share_dir: PathBuf) -> Result<()> {
    for warning in &config.warnings {
        tracing::warn!("config: {warning}");
    }
    // Before any child exists: it must be able to register every process group we start.
    kimi_core::guardian::enable();
    let env = config::process_env();
    let resolved = config
        .resolve_model(options.model.as_deref(), &env)
        .context("invalid model configuration")?;

    let work_dir = match &options.work_dir {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let choice = match (&options.session, options.continue_last) {
        (Some(id), _) => SessionChoice::Id(id.clone()),
        (None, true) => SessionChoice::Continue,
        (None, false) => SessionChoice::New,
    };
    let session = session::open(&share_dir, &work_dir, &choice)?;
    let user_agent = kimi_llm::UserAgent::ours();
    let provider_options = kimi_core::llm::ProviderOptions {
        // Reference: without a flag the config decides, and `default_thinking = false` switches thinking
        // off explicitly (Kimi gets `thinking: {type: disabled}`), it does not leave it unsaid.
        thinking: Some(options.thinking.unwrap_or(config.default_thinking)),
        session_id: session.id.clone(),
        reserved_context_size: config.loop_control.reserved_context_size,
        user_agent: user_agent.clone(),
    };
    let llm = kimi_core::llm::create_provider(&resolved, &env, &provider_options)?;
    let model = kimi_core::llm::model_info(&resolved, llm.as_ref());
    tracing::info!(session = %session.id, dir = %session.dir.display(), resumed = session.resumed, "session opened");
    let state = StateFile::load(&session.state_path());

    let (server, client) = Server::new(ServerConfig {
        max_line_bytes: max_line_bytes(),
    });
    let recorder = Arc::new(WireRecorder::open(&session.wire_path()).await);
    let events = EventSink::new(client.clone(), Some(recorder));
    let approval_state = ApprovalState {
        yolo: options.yolo || config.default_yolo || state.approval.yolo,
        afk: options.afk || state.approval.afk,
        auto_approve_actions: state.approval.auto_approve_actions.clone(),
    };
    let approvals = Arc::new(ApprovalRuntime::new(client, approval_state));
    // Extra directories: the session's, then `--add-dir`'s; kept in state.json as the reference does.
    let start_dirs =
        kimi_core::workspace::start_dirs(&state.additional_dirs, &options.add_dirs, &session.work_dir);
    if start_dirs.changed {
        let mut file = StateFile::load(&session.state_path());
        file.additional_dirs = start_dirs.dirs.iter().map(|d| d.display().to_string()).collect();
        let bytes = serde_json::to_vec_pretty(&file).context("state.json")?;
        if let Err(e) = session::write_atomic(&session.state_path(), &bytes) {
            tracing::error!(error = %e, "state.json not written with the additional directories");
        }
    }
    let sandbox = Arc::new(start_sandbox(&config, options.sandbox));
    let environment = Arc::new(
        Environment::new(
            session.work_dir.clone(),
            start_dirs.dirs.clone(),
            session.dir.clone(),
        )
        .with_sandbox(sandbox),
    );
    let session_state = Arc::new(SessionState::new(state.todos.clone()));
    let plan = Arc::new(PlanMode::new(
        options.plan || config.default_plan_mode || state.plan_mode,
        state.plan_slug.clone(),
        kimi_core::plan::plans_dir(),
    ));
    let client_flags = Arc::new(ClientFlags::default());
    // Scheduled prompts: jobs kept in the session directory, fired by a scheduler started below.
    let cron = (!kimi_core::cron::is_disabled(&env)).then(|| {
        Arc::new(kimi_core::cron::CronStore::load(
            &session.dir,
            kimi_core::cron::clock::from_env(&env),
        ))
    });
    let mcp_servers = kimi_core::mcp::config::parse_sources(&options.mcp_sources)?;
    let toolset = Arc::new(Toolset::new());
    toolset.set_output_budget(kimi_core::toolset::OutputBudget::for_session(&session.dir));
    let agent_path = options.agent_file.as_ref().map_or_else(
        || agent_spec::DEFAULT_AGENT.to_owned(),
        |p| p.to_string_lossy().into_owned(),
    );
    let spec = AgentSpec::load(&agent_path)?;
    let skills = Arc::new(Skills::discover(&DiscoveryOptions {
        work_dir: session.work_dir.clone(),
        home: kimi_core::paths::home_dir(),
        share_dir: share_dir.clone(),
        skills_dirs: options.skills_dirs.clone(),
        merge_brands: config.merge_all_available_skills,
        extra_skill_dirs: config.extra_skill_dirs.clone(),
    }));
    let notifications = Arc::new(NotificationQueue::open(&session.dir));
    let tasks = TaskManager::open(
        &session.dir,
        &session.id,
        config.background.clone(),
        Arc::clone(&notifications),
    );
    // A background agent waiting for an approval shows as `awaiting_approval`, as in the reference.
    approvals.on_background_wait({
        let tasks = tasks.clone();
        Arc::new(move |task: &str, waiting: Option<&str>| {
            let event = match waiting {
                Some(reason) => kimi_core::background::TaskEvent::AwaitApproval {
                    reason: reason.to_owned(),
                },
                None => kimi_core::background::TaskEvent::Resume,
            };
            if let Err(e) = tasks.record(task, event) {
                tracing::debug!(task, error = %e, "approval wait not recorded");
            }
        })
    });
    let base_vars =
        kimi_core::prompt::builtin_vars(&session.work_dir, &start_dirs.dirs, &skills.prompt_listing());
    let mut vars = base_vars.clone();
    vars.extend(spec.system_prompt_args.clone());
    let system_prompt = kimi_core::prompt::render(&spec.system_prompt_template()?, &vars);
    let context = Context::open(&session.context_path(), system_prompt).await;
    // What the model was already told (in this session's history) is not told again.
    notifications.ack_all(Sink::Llm, &ids_in_history(context.messages()));

    let loop_control = &config.loop_control;
    let settings = LoopSettings {
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
    };
    let hooks = Arc::new(HookEngine::new(
        config.hooks.clone(),
        session.work_dir.clone(),
        session.id.clone(),
    ));
    let types = subagent_types(&spec, &base_vars);
    // The `Agent` tool is offered only when the agent file names subagent types.
    let subagents = (!types.is_empty()).then(|| {
        Arc::new(kimi_tools::SubagentKit {
            llm: llm.clone(),
            model: model.clone(),
            settings,
            hooks: Arc::clone(&hooks),
            types,
            model_aliases: config.models.keys().cloned().collect(),
            models: model_switch(&config, &env, &provider_options),
        })
    });
    let deps = kimi_tools::ToolDeps {
        env: Arc::clone(&environment),
        state: Arc::clone(&session_state),
        client: Arc::clone(&client_flags),
        approvals: Arc::clone(&approvals),
        events: events.clone(),
        model_capabilities: model.capabilities.clone(),
        plan: Arc::clone(&plan),
        subagents,
        cron: cron.clone(),
        tasks: tasks.clone(),
        web: kimi_tools::WebSettings {
            services: config.services.clone(),
            user_agent: user_agent.clone(),
            limits: kimi_tools::web::WebLimits::from_env(|name| env.get(name).cloned()),
        },
        // Reference: Glob may also look into skill directories outside the workspace.
        skills_dirs: skills
            .roots()
            .iter()
            .filter(|root| !root.starts_with(&session.work_dir))
            .cloned()
            .collect(),
    };
    register_tools(&toolset, &spec.effective_tools(), &deps);
    // After the agent's tools, and only when some skill may be loaded by the model (seeds/002).
    if let Some(tool) = SkillTool::new(Arc::clone(&skills)) {
        toolset.register(Arc::new(tool));
    }

    let source = if session.resumed { "resume" } else { "startup" };
    let _ = hooks
        .trigger(HookEvent::SessionStart, source, hook_input::session_start(source))
        .await;
    let soul = Arc::new(Soul::new(SoulParts {
        llm,
        model,
        settings,
        context,
        toolset,
        approvals,
        events,
        hooks: Arc::clone(&hooks),
        plan,
        subagent: None,
    }));
    // After the built-ins, so an MCP tool can never take a built-in's name.
    let mcp = McpManager::start(
        mcp_servers,
        McpSettings {
            tool_call_timeout: config.mcp.client.tool_call_timeout(),
            share_dir: share_dir.clone(),
        },
        Arc::clone(soul.toolset()),
    );
    soul.attach_mcp(Arc::clone(&mcp));
    soul.attach_skills(skills);
    soul.attach_session(SessionInfo {
        id: session.id.clone(),
        work_dir: session.work_dir.clone(),
        share_dir: share_dir.clone(),
        env: Arc::clone(&environment),
    });
    soul.attach_notifications(notifications);
    let info = AgentInfo {
        server: ServerInfo {
            name: "kimi-agent".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        share_dir,
        user_agent,
        environment: Arc::clone(&environment),
    };
    let agent = Arc::new(CoreAgent::new(soul, session, info, session_state, client_flags));
    let scheduler = cron.map(|store| {
        kimi_core::cron::CronScheduler::spawn(store, server.turn_starter(), Arc::clone(&agent) as _)
    });
    server
        .run(tokio::io::stdin(), tokio::io::stdout(), agent, shutdown_signal())
        .await;
    if let Some(scheduler) = scheduler {
        scheduler.stop().await;
    }
    // EOF, a signal or a lost client: MCP servers (and their process groups) go first.
    mcp.shutdown().await;
    hooks.detach_wire();
    let end = hooks.trigger(HookEvent::SessionEnd, "exit", hook_input::session_end("exit"));
    if tokio::time::timeout(SESSION_END_HOOK_LIMIT, end).await.is_err() {
        tracing::warn!("SessionEnd hooks did not finish in time");
    }
    // Reference order: after SessionEnd; stopped unless `background.keep_alive_on_exit`.
    tasks.shutdown().await;
    hooks.shutdown(HOOK_SHUTDOWN_GRACE).await;
    Ok(())
}

/// The sandbox the configuration and `--sandbox` ask for, after the kernel's trial; said in the log
/// (loudly when it cannot be enforced: every command will then be refused).
pub fn start_sandbox(config: &Config, flag: Option<SandboxMode>) -> Sandbox {
    let sandbox = Sandbox::start(sandbox_policy(config, flag));
    match sandbox.enforcement() {
        Enforcement::Unavailable(_) => tracing::error!("sandbox: {}", sandbox.summary()),
        Enforcement::Off | Enforcement::Enforced { .. } => tracing::info!("sandbox: {}", sandbox.summary()),
    }
    sandbox
}

/// The sandbox policy of the configuration, with `--sandbox` over `sandbox_mode`.
pub fn sandbox_policy(config: &Config, flag: Option<SandboxMode>) -> SandboxPolicy {
    SandboxPolicy {
        mode: flag.unwrap_or(config.sandbox_mode),
        network: config.sandbox_network,
        extra_roots: config.sandbox_writable_roots.clone(),
    }
}

/// The subagent types the agent file offers. A type whose agent file does not load is left out
/// (logged), so one broken file does not take the others down.
fn subagent_types(
    spec: &AgentSpec,
    vars: &std::collections::BTreeMap<String, String>,
) -> Vec<kimi_tools::SubagentType> {
    spec.subagents
        .iter()
        .filter_map(|(name, sub)| {
            kimi_tools::SubagentType::load(name, &sub.description, &sub.path, vars)
                .inspect_err(|e| tracing::warn!(subagent = %name, error = %e, "subagent type not loaded"))
                .ok()
        })
        .collect()
}

/// Builds the provider of a configured model alias, for subagents started with `model`.
fn model_switch(
    config: &Config,
    env: &Env,
    options: &kimi_core::llm::ProviderOptions,
) -> kimi_tools::ModelSwitch {
    let (config, env, options) = (config.clone(), env.clone(), options.clone());
    kimi_tools::ModelSwitch::new(move |alias| {
        let resolved = config
            .resolve_model(Some(alias), &env)
            .map_err(|e| e.to_string())?;
        let llm = kimi_core::llm::create_provider(&resolved, &env, &options).map_err(|e| format!("{e:#}"))?;
        let model = kimi_core::llm::model_info(&resolved, llm.as_ref());
        Ok((llm, model))
    })
}

/// Builds the agent's tools, by the reference's `module:Class` paths or by our tool names.
fn register_tools(toolset: &Toolset, paths: &[String], deps: &kimi_tools::ToolDeps) {
    for path in paths {
        let name = kimi_tools::resolve_tool_path(path).or_else(|| {
            kimi_tools::DEFAULT_TOOLS
                .iter()
                .chain(kimi_tools::OWN_TOOLS)
                .find(|name| **name == path.as_str())
                .copied()
        });
        let Some(name) = name else {
            tracing::warn!(tool = %path, "unknown tool path in agent file; skipped");
            continue;
        };
        match kimi_tools::build_tool(name, deps) {
            Ok(Some(tool)) => toolset.register(tool),
            Ok(None) => tracing::debug!(tool = name, "tool declined to load"),
            Err(e) => tracing::warn!(tool = name, error = %e, "tool not built"),
        }
    }
}

/// The line cap: `KIMI_AGENT_MAX_LINE_BYTES` or 64 MiB.
fn max_line_bytes() -> usize {
    std::env::var("KIMI_AGENT_MAX_LINE_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n: &usize| *n > 0)
        .unwrap_or(kimi_wire::framing::DEFAULT_MAX_LINE_BYTES)
}

fn clamp_u32(value: u64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

/// Resolves on SIGINT or SIGTERM: both end the session like EOF does.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
    else {
        // Without signal handlers we simply never shut down by signal.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => tracing::info!("SIGINT received"),
        _ = term.recv() => tracing::info!("SIGTERM received"),
    }
}
