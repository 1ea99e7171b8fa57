//! Wiring a wire session together: config → model → session → tools → soul → server.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result};
use async_trait::async_trait;
use kimi_core::agent_spec::{self, AgentSpec};
use kimi_core::approval::{ApprovalDetails, ApprovalRuntime, ApprovalState};
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
use kimi_core::session::{self, Session, SessionChoice};
use kimi_core::session_gate::{NotHeld, OpenError, ReadOnlyFacts, SessionGate, SessionOpener};
use kimi_core::session_lock::SessionLock;
use kimi_core::skills::{DiscoveryOptions, SkillTool, Skills};
use kimi_core::soul::{LoopSettings, ModelInfo, RalphLoop, RetryBackoff, SessionInfo, Soul, SoulParts};
use kimi_core::state::{ClientFlags, Environment, SessionState, StateFile};
use kimi_core::toolset::Toolset;
use kimi_llm::cassette::{CassetteWriter, RunPaths};
use kimi_wire::message::UserInput;
use kimi_wire::params::{
    InitializeParams, InitializeResult, PromptResult, ReplayResult, ServerInfo, SetPlanModeResult,
    SteerResult,
};
use kimi_wire::server::writer::Output;
use kimi_wire::{ClientHandle, IdleSignal, RpcError, Server, ServerConfig, TurnStarter, WireAgent};
use tokio_util::sync::CancellationToken;

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
    /// `--max-ralph-iterations`.
    pub max_ralph_iterations: Option<i64>,
    /// `--add-dir`.
    pub add_dirs: Vec<PathBuf>,
    /// `--agent-file`, or a built-in agent's `builtin:` path (`--agent`); the default agent when `None`.
    pub agent_file: Option<PathBuf>,
    /// `--skills-dir`s; when any are given they replace project and user skill discovery.
    pub skills_dirs: Vec<PathBuf>,
    /// MCP configuration documents, already read: `--mcp-config-file`s (or `<share>/mcp.json`), then
    /// `--mcp-config`s.
    pub mcp_sources: Vec<serde_json::Value>,
    /// `--sandbox` (else the configuration's `sandbox_mode`).
    pub sandbox: Option<SandboxMode>,
    /// `--record-llm FILE`.
    pub record_llm: Option<PathBuf>,
}

/// Opens the session and serves the wire protocol on stdin/stdout until the client goes away. The
/// session's files are written only while this process holds the session's lock: when another process
/// holds it, this one serves what only reads and takes the session over once the holder is gone
/// (`kimi_core::session_gate`).
/// Serves the session over stdin/stdout; `idle` is the runtime's park signal, which wakes the stdout
/// writer once per burst of events instead of once per event.
pub async fn serve(options: RunOptions, config: Config, share_dir: PathBuf, idle: IdleSignal) -> Result<()> {
    for warning in &config.warnings {
        tracing::warn!("config: {warning}");
    }
    // Before any child exists: it must be able to register every process group we start.
    kimi_core::guardian::enable();
    // Likewise: every child's environment comes from `[shell_env]`.
    kimi_core::child_env::install(kimi_core::child_env::ChildEnv::from_config(&config));
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
    // Made once per process, before the session is held: the kernel's verdict (and the private network
    // namespace commands join) does not depend on who writes the session.
    let sandbox = Arc::new(start_sandbox(&config, options.sandbox));
    let record = match &options.record_llm {
        Some(path) => {
            Some(Arc::new(CassetteWriter::open(path).with_context(|| {
                format!("cannot open {} for --record-llm", path.display())
            })?))
        }
        None => None,
    };
    let text = |path: &std::path::Path| path.to_string_lossy().into_owned();
    let paths = RunPaths {
        work_dir: text(&session.work_dir),
        share_dir: text(&share_dir),
        home: kimi_core::paths::home_dir()
            .as_deref()
            .map(text)
            .unwrap_or_default(),
    };
    let user_agent = kimi_llm::UserAgent::ours();
    let provider_options = kimi_core::llm::ProviderOptions {
        // Reference: without a flag the config decides, and `default_thinking = false` switches thinking
        // off explicitly (Kimi gets `thinking: {type: disabled}`), it does not leave it unsaid.
        thinking: Some(config.thinking(options.thinking)),
        session_id: session.id.clone(),
        reserved_context_size: config.loop_control.reserved_context_size,
        user_agent: user_agent.clone(),
        share_dir: share_dir.clone(),
        paths,
        record,
    };
    let llm = kimi_core::llm::create_provider(&resolved, &env, &provider_options)?;
    let model = kimi_core::llm::model_info(&resolved, llm.as_ref());
    tracing::info!(session = %session.id, dir = %session.dir.display(), resumed = session.resumed, "session opened");

    let (server, client) = Server::new(ServerConfig {
        max_line_bytes: max_line_bytes(),
        idle: Some(idle),
        ..ServerConfig::default()
    });
    // What does not depend on holding the session is read here, once: a broken agent file or MCP
    // configuration fails the start, whoever holds the session.
    let mut mcp_servers = kimi_core::mcp::config::parse_sources(&options.mcp_sources)?;
    if config.mcp_discover {
        mcp_servers = discovered_mcp_servers(mcp_servers, &session.work_dir);
    }
    let agent_path = options.agent_file.as_ref().map_or_else(
        || agent_spec::DEFAULT_AGENT.to_owned(),
        |p| p.to_string_lossy().into_owned(),
    );
    let spec = AgentSpec::load(&agent_path)?;
    let prompt_template = spec.system_prompt_template()?;
    let tool_names = tool_names(&spec.effective_tools());
    let skills = Arc::new(Skills::discover(&DiscoveryOptions {
        work_dir: session.work_dir.clone(),
        home: kimi_core::paths::home_dir(),
        share_dir: share_dir.clone(),
        skills_dirs: options.skills_dirs.clone(),
        merge_brands: config.merge_all_available_skills,
        extra_skill_dirs: config.extra_skill_dirs.clone(),
    }));
    let server_info = ServerInfo {
        name: "kimi-agent".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    };
    let mut builtin_tools: BTreeSet<String> = tool_names
        .iter()
        .map(|name| kimi_tools::model_name(name).to_owned())
        .collect();
    if let Some(tool) = SkillTool::new(Arc::clone(&skills)) {
        builtin_tools.insert(kimi_core::toolset::Tool::spec(&tool).name.clone());
    }
    let facts = ReadOnlyFacts {
        server: server_info.clone(),
        slash_commands: kimi_core::slash::commands(Some(&skills)),
        builtin_tools,
        hooks: HookEngine::new(config.hooks.clone(), session.work_dir.clone(), session.id.clone()),
        sandbox: sandbox.info(
            &session.work_dir,
            &stored_and_flag_dirs(&session, &options.add_dirs),
        ),
    };
    let opener = Opener {
        turns: server.turn_starter(),
        client: client.clone(),
        options,
        config,
        env,
        share_dir,
        llm,
        model,
        provider_options,
        user_agent,
        spec,
        prompt_template,
        tool_names,
        skills,
        mcp_servers,
        server_info,
        signed_in: resolved.provider.oauth.is_some(),
        sandbox,
        provider_type: resolved.provider.kind.as_str().to_owned(),
    };
    let gate = Arc::new(SessionGate::new(session, client, facts, opener));
    match gate.take_over().await {
        Ok(_) => {}
        Err(NotHeld::Held(holder)) => tracing::warn!(
            %holder,
            "the session is held by another process; serving what only reads until it exits"
        ),
        // Served read-only; each write request says why (the gate logs it too).
        Err(NotHeld::Lock(e)) => tracing::error!(error = %e, "the session cannot be locked"),
        Err(e @ NotHeld::Open(_)) => return Err(e.into()),
    }
    server
        .run(
            tokio::io::stdin(),
            Output::stdout(),
            Arc::clone(&gate),
            shutdown_signal(),
        )
        .await;
    if let Some(held) = gate.held() {
        held.close().await;
    }
    Ok(())
}

/// Everything needed to open the session for writing, gathered at start; used once this process holds
/// the session's lock (at start, or later when the holder exits).
struct Opener {
    options: RunOptions,
    config: Config,
    env: Env,
    share_dir: PathBuf,
    client: ClientHandle,
    turns: TurnStarter,
    llm: Option<Arc<dyn kimi_llm::ChatProvider>>,
    model: ModelInfo,
    provider_options: kimi_core::llm::ProviderOptions,
    user_agent: kimi_llm::UserAgent,
    spec: AgentSpec,
    prompt_template: String,
    tool_names: Vec<&'static str>,
    skills: Arc<Skills>,
    mcp_servers: Vec<kimi_core::mcp::config::ServerConfig>,
    server_info: ServerInfo,
    /// The model's provider signs in with a Kimi account (`login`), so `info` can say so.
    signed_in: bool,
    /// How the model's commands and the file tools' writes are confined.
    sandbox: Arc<Sandbox>,
    /// The model's provider type, named in provider errors' data.
    provider_type: String,
}

#[async_trait]
impl SessionOpener for Opener {
    type Held = HeldSession;

    async fn open(&self, session: Session, lock: SessionLock) -> Result<Arc<HeldSession>, OpenError> {
        open_session(self, session, lock)
            .await
            .map_err(|e| format!("{e:#}").into())
    }
}

/// Builds everything that writes `session`, which this process holds by `lock`.
async fn open_session(opener: &Opener, session: Session, lock: SessionLock) -> Result<Arc<HeldSession>> {
    let Opener {
        options,
        config,
        env,
        share_dir,
        client,
        turns,
        llm,
        model,
        provider_options,
        user_agent,
        spec,
        prompt_template,
        tool_names,
        skills,
        mcp_servers,
        server_info,
        signed_in,
        sandbox,
        provider_type,
    } = opener;
    let state = StateFile::load(&session.state_path());
    let recorder = Arc::new(WireRecorder::open(&session.wire_path()).await);
    let events = EventSink::new(client.clone(), Some(recorder));
    let approval_state = ApprovalState {
        yolo: config.yolo(options.yolo) || state.approval.yolo,
        afk: options.afk || state.approval.afk,
        auto_approve_actions: state.approval.auto_approve_actions.clone(),
    };
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
        kimi_core::plan::plans_dir(),
    ));
    let client_flags = Arc::new(ClientFlags::default());
    // Scheduled prompts: jobs kept in the session directory, fired by a scheduler started below.
    let cron = (!kimi_core::cron::is_disabled(env)).then(|| {
        Arc::new(kimi_core::cron::CronStore::load(
            &session.dir,
            kimi_core::cron::clock::from_env(env),
        ))
    });
    let toolset = Arc::new(Toolset::new());
    // What the model's texts call its tools: the kimi-code agent's are `Read`, `Write`, `Edit`, ...
    let model_tool_names = kimi_tools::tool_names(&spec.effective_tools());
    toolset.set_output_budget(
        kimi_core::toolset::OutputBudget::for_session(&session.dir).with_tool_names(model_tool_names),
    );
    let notifications = Arc::new(NotificationQueue::open(&session.dir));
    let tasks = TaskManager::open(
        &session.dir,
        &session.id,
        config.background.clone(),
        Arc::clone(&notifications),
    );
    // A background agent waiting for an approval shows as `awaiting_approval`, as in the reference.
    let approvals = Arc::new(
        ApprovalRuntime::new(client.clone(), approval_state)
            .with_details(ApprovalDetails::from(config.approval_details))
            .with_background_waits({
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
            }),
    );
    let base_vars =
        kimi_core::prompt::builtin_vars(&session.work_dir, &start_dirs.dirs, &skills.prompt_listing());
    let mut vars = base_vars.clone();
    vars.extend(spec.system_prompt_args.clone());
    let system_prompt = kimi_core::prompt::render(prompt_template, &vars);
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
        ralph: RalphLoop::from_config(
            options
                .max_ralph_iterations
                .unwrap_or(loop_control.max_ralph_iterations),
        ),
    };
    // A hook's relative program is the config file's neighbour, never the work dir's.
    let config_dir = config.source_file.as_deref().and_then(std::path::Path::parent);
    let hooks = Arc::new(
        HookEngine::new(config.hooks.clone(), session.work_dir.clone(), session.id.clone())
            .with_config_dir(config_dir),
    );
    let types = subagent_types(spec, &base_vars);
    // The `Agent` tool is offered only when the agent file names subagent types.
    let subagents = (!types.is_empty()).then(|| {
        Arc::new(kimi_tools::SubagentKit {
            llm: llm.clone(),
            model: model.clone(),
            settings,
            hooks: Arc::clone(&hooks),
            types,
            model_aliases: config.models.keys().cloned().collect(),
            models: model_switch(config, env, provider_options),
        })
    });
    // Skill directories outside the workspace: Glob searches them, and reads there need no question.
    let skills_outside: Vec<PathBuf> = skills
        .roots()
        .iter()
        .filter(|root| !root.starts_with(&session.work_dir))
        .cloned()
        .collect();
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
            fetch_allowed_hosts: kimi_tools::web::HostList::new(&config.fetch_allowed_hosts),
            fetch_allow_private_hosts: kimi_tools::web::HostList::new(&config.fetch_allow_private_hosts),
        },
        // Reference: Glob may also look into skill directories outside the workspace.
        skills_dirs: skills_outside.clone(),
        files: kimi_tools::file::FileSettings {
            read_roots: skills_outside
                .into_iter()
                .chain(std::iter::once(kimi_core::plan::plans_dir()))
                .collect(),
            secrets: kimi_tools::file::SecretFiles::new(share_dir, config.source_file.as_deref()),
        },
    };
    register_tools(&toolset, tool_names, &deps);
    // After the agent's tools, and only when some skill may be loaded by the model (seeds/002).
    if let Some(tool) = SkillTool::new(Arc::clone(skills)) {
        toolset.register(Arc::new(tool));
    }

    let source = if session.resumed { "resume" } else { "startup" };
    let _ = hooks
        .trigger(HookEvent::SessionStart, source, hook_input::session_start(source))
        .await;
    // After the built-ins, so an MCP tool can never take a built-in's name.
    let mcp = McpManager::start(
        mcp_servers.clone(),
        McpSettings {
            tool_call_timeout: config.mcp.client.tool_call_timeout(),
            tool_names: config.mcp_tool_names,
            share_dir: share_dir.clone(),
        },
        Arc::clone(&toolset),
    );
    let soul = Arc::new(Soul::new(SoulParts {
        llm: llm.clone(),
        model: model.clone(),
        settings,
        context,
        toolset,
        approvals,
        events,
        hooks: Arc::clone(&hooks),
        plan,
        subagent: None,
        mcp: Some(Arc::clone(&mcp)),
        skills: Some(Arc::clone(skills)),
        session: Some(SessionInfo {
            id: session.id.clone(),
            work_dir: session.work_dir.clone(),
            share_dir: share_dir.clone(),
            env: Arc::clone(&environment),
        }),
        notifications: Some(notifications),
        reminders: kimi_core::reminders::Reminders::for_root(!config.skip_afk_prompt_injection)
            .with_tool_names(model_tool_names),
    }));
    let info = AgentInfo {
        server: server_info.clone(),
        share_dir: share_dir.clone(),
        user_agent: user_agent.clone(),
        signed_in: *signed_in,
        environment: Arc::clone(&environment),
        provider: provider_type.clone(),
    };
    let agent = Arc::new(CoreAgent::new(soul, session, info, session_state, client_flags));
    let scheduler = cron
        .map(|store| kimi_core::cron::CronScheduler::spawn(store, turns.clone(), Arc::clone(&agent) as _));
    Ok(Arc::new(HeldSession {
        agent,
        scheduler: Mutex::new(scheduler),
        mcp,
        hooks,
        tasks,
        lock: Mutex::new(Some(lock)),
    }))
}

/// The session as this process holds it: the agent that writes it, what runs beside the agent, and
/// the lock, let go last.
#[derive(Debug)]
struct HeldSession {
    agent: Arc<CoreAgent>,
    /// Taken by [`HeldSession::close`] (no await while the mutex is held).
    scheduler: Mutex<Option<kimi_core::cron::CronScheduler>>,
    mcp: Arc<McpManager>,
    hooks: Arc<HookEngine>,
    tasks: TaskManager,
    /// Taken by [`HeldSession::close`], once everything that writes the session has stopped.
    lock: Mutex<Option<SessionLock>>,
}

impl HeldSession {
    /// After the server stopped: stops what runs beside the agent, in the reference's order, then
    /// lets go of the session.
    async fn close(&self) {
        let scheduler = take(&self.scheduler);
        if let Some(scheduler) = scheduler {
            scheduler.stop().await;
        }
        // EOF, a signal or a lost client: MCP servers (and their process groups) go first.
        self.mcp.shutdown().await;
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
    kimi_core::sync::lock(slot).take()
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

/// `ours` and, after them, the stdio servers other agents' configurations define (`mcp_discover`); a
/// file or entry that cannot be used is logged and skipped.
fn discovered_mcp_servers(
    ours: Vec<kimi_core::mcp::ServerConfig>,
    work_dir: &std::path::Path,
) -> Vec<kimi_core::mcp::ServerConfig> {
    let Some(home) = kimi_core::paths::home_dir() else {
        tracing::warn!("mcp_discover: no home directory, nothing discovered");
        return ours;
    };
    let found = kimi_core::mcp::discover::discover(&home, work_dir);
    for warning in &found.warnings {
        tracing::warn!("mcp_discover: {warning}");
    }
    for server in &found.servers {
        tracing::info!(server = %server.server.name, file = %server.origin.display(), "MCP server discovered");
    }
    kimi_core::mcp::discover::merge(ours, &found)
}

/// The session's extra directories as a process that does not hold the session sees them (it writes
/// nothing, so nothing is dropped or added in `state.json`): the stored ones, then `--add-dir`'s.
fn stored_and_flag_dirs(session: &Session, flags: &[PathBuf]) -> Vec<PathBuf> {
    StateFile::load(&session.state_path())
        .additional_dirs
        .iter()
        .map(PathBuf::from)
        .chain(flags.iter().cloned())
        .map(|dir| session::canonical_work_dir(&dir))
        .collect()
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

/// The built-in tools the agent file names (reference `module:Class` paths, our tool names, or the
/// kimi-code profile's `kimi_code:` names), resolved; unknown ones are logged and left out.
fn tool_names(entries: &[String]) -> Vec<&'static str> {
    entries
        .iter()
        .filter_map(|entry| {
            let name = kimi_tools::resolve_entry(entry);
            if name.is_none() {
                tracing::warn!(tool = %entry, "unknown tool path in agent file; skipped");
            }
            name
        })
        .collect()
}

/// Builds the named built-in tools into `toolset`.
fn register_tools(toolset: &Toolset, names: &[&'static str], deps: &kimi_tools::ToolDeps) {
    for &name in names {
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

/// Resolves on SIGINT, SIGTERM or SIGHUP: each ends the session like EOF does (the running turn is
/// cancelled and its `prompt` answered `cancelled`, children are stopped, exit 0). SIGHUP is what a
/// closing terminal or editor sends; left to its default action it kills the process before the pending
/// `prompt` is answered, and the reference does not handle it.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        // Without signal handlers we simply never shut down by signal.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => tracing::info!("SIGINT received"),
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = hup.recv() => tracing::info!("SIGHUP received"),
    }
}
