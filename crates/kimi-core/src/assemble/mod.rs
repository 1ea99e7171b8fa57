//! The composition root: builds a wire session from the command line's [`RunOptions`], the
//! [`Config`], the share directory and a [`ToolFactory`] (kimi-tools'), and returns the running
//! agent the binary serves ([`session`], [`Assembled`]). The same builder makes subagents' souls
//! ([`Subagents`], for the `Agent` tool): every [`crate::soul::Soul`] comes from `soul::soul`, with
//! everything it needs given when it is made.
//!
//! Layout: `options` (the flags as data), `tools` (the factory and what tools get), `kinds` (subagent
//! types, the model switch), `soul` (making a soul), `open` (the session once its lock is held),
//! `held` (the held session and its shutdown), `start` (what is read or started before that),
//! `subagent` (running a subagent in the foreground or background).

mod held;
mod kinds;
mod open;
mod options;
mod soul;
mod start;
mod subagent;
mod tools;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use kimi_llm::cassette::{CassetteWriter, RunPaths};
use kimi_wire::params::ServerInfo;
use kimi_wire::server::writer::Output;
use kimi_wire::{IdleSignal, Server, ServerConfig};
use tokio::io::AsyncRead;

pub use options::RunOptions;
pub use start::sandbox_policy;
pub use subagent::AgentRequest;
pub use tools::{Subagents, ToolFactory, ToolInputs};

use self::open::Opener;
use self::tools::resolve_all;
use crate::agent_spec::{self, AgentSpec, AgentSpecError};
use crate::config::{self, Config, ConfigError};
use crate::hooks::HookEngine;
use crate::llm::{LlmError, ProviderOptions};
use crate::session::{self, SessionChoice, SessionError};
use crate::session_gate::{NotHeld, ReadOnlyFacts, SessionGate};
use crate::skills::{DiscoveryOptions, SkillTool, Skills};

/// Why a session could not be built. The messages are the ones the binary prints at start.
#[derive(Debug, thiserror::Error)]
pub enum AssembleError {
    /// The model configuration does not resolve.
    #[error("invalid model configuration")]
    Model(#[source] ConfigError),
    /// No `--work-dir` and no current directory.
    #[error("cannot read the current directory")]
    WorkDir(#[source] std::io::Error),
    /// The session could not be found or created.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// `--record-llm`'s file could not be opened.
    #[error("cannot open {} for --record-llm", path.display())]
    RecordLlm {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The model's provider could not be made.
    #[error(transparent)]
    Provider(#[from] LlmError),
    /// An MCP configuration is invalid.
    #[error(transparent)]
    Mcp(#[from] crate::mcp::config::ConfigError),
    /// The agent file does not load.
    #[error(transparent)]
    AgentFile(#[from] AgentSpecError),
    /// The session was ours but could not be opened.
    #[error(transparent)]
    Open(NotHeld),
}

/// A built session, ready to serve: the wire server and the agent behind it.
#[derive(Debug)]
pub struct Assembled {
    server: Server,
    gate: Arc<SessionGate<Opener>>,
}

impl Assembled {
    /// Serves `input` and `output` until the input ends or `shutdown` completes, then stops what runs
    /// beside the agent and lets go of the session.
    pub async fn serve<R, S>(self, input: R, output: impl Into<Output>, shutdown: S)
    where
        R: AsyncRead + Unpin,
        S: Future<Output = ()>,
    {
        self.server
            .run(input, output, Arc::clone(&self.gate), shutdown)
            .await;
        if let Some(held) = self.gate.held() {
            held.close().await;
        }
    }
}

/// Builds the session `options` name. Its files are written only while this process holds the
/// session's lock: when another process holds it, the agent serves what only reads and takes the
/// session over once the holder is gone ([`crate::session_gate`]). `idle` is the runtime's park signal,
/// which wakes the stdout writer once per burst of events instead of once per event.
pub async fn session(
    options: RunOptions,
    config: Config,
    share_dir: PathBuf,
    factory: Arc<dyn ToolFactory>,
    idle: IdleSignal,
) -> Result<Assembled, AssembleError> {
    for warning in &config.warnings {
        tracing::warn!("config: {warning}");
    }
    // Before any child exists: it must be able to register every process group we start.
    crate::guardian::enable();
    // Likewise: every child's environment comes from `[shell_env]`.
    crate::child_env::install(crate::child_env::ChildEnv::from_config(&config));
    let env = config::process_env();
    let resolved = config
        .resolve_model(options.model.as_deref(), &env)
        .map_err(AssembleError::Model)?;

    let work_dir = match &options.work_dir {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(AssembleError::WorkDir)?,
    };
    let choice = match (&options.session, options.continue_last) {
        (Some(id), _) => SessionChoice::Id(id.clone()),
        (None, true) => SessionChoice::Continue,
        (None, false) => SessionChoice::New,
    };
    let session = session::open(&share_dir, &work_dir, &choice)?;
    // Made once per process, before the session is held: the kernel's verdict (and the private network
    // namespace commands join) does not depend on who writes the session.
    let sandbox = Arc::new(start::start_sandbox(&config, options.sandbox));
    let record = match &options.record_llm {
        Some(path) => Some(Arc::new(CassetteWriter::open(path).map_err(|source| {
            AssembleError::RecordLlm {
                path: path.clone(),
                source,
            }
        })?)),
        None => None,
    };
    let text = |path: &std::path::Path| path.to_string_lossy().into_owned();
    let paths = RunPaths {
        work_dir: text(&session.work_dir),
        share_dir: text(&share_dir),
        home: crate::paths::home_dir().as_deref().map(text).unwrap_or_default(),
    };
    let user_agent = kimi_llm::UserAgent::ours();
    let provider_options = ProviderOptions {
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
    let llm = crate::llm::create_provider(&resolved, &env, &provider_options)?;
    let model = crate::llm::model_info(&resolved, llm.as_ref());
    tracing::info!(session = %session.id, dir = %session.dir.display(), resumed = session.resumed, "session opened");

    let (server, client) = Server::new(ServerConfig {
        max_line_bytes: start::max_line_bytes(),
        idle: Some(idle),
        ..ServerConfig::default()
    });
    // What does not depend on holding the session is read here, once: a broken agent file or MCP
    // configuration fails the start, whoever holds the session.
    let mut mcp_servers = crate::mcp::config::parse_sources(&options.mcp_sources)?;
    if config.mcp_discover {
        mcp_servers = start::discovered_mcp_servers(mcp_servers, &session.work_dir);
    }
    let agent_path = options.agent_file.as_ref().map_or_else(
        || agent_spec::DEFAULT_AGENT.to_owned(),
        |p| p.to_string_lossy().into_owned(),
    );
    let spec = AgentSpec::load(&agent_path)?;
    let prompt_template = spec.system_prompt_template()?;
    let tools = resolve_all(factory.as_ref(), &spec.effective_tools());
    let skills = Arc::new(Skills::discover(&DiscoveryOptions {
        work_dir: session.work_dir.clone(),
        home: crate::paths::home_dir(),
        share_dir: share_dir.clone(),
        skills_dirs: options.skills_dirs.clone(),
        merge_brands: config.merge_all_available_skills,
        extra_skill_dirs: config.extra_skill_dirs.clone(),
    }));
    let server_info = ServerInfo {
        name: "kimi-agent".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    };
    let mut builtin_tools: std::collections::BTreeSet<String> = tools
        .iter()
        .map(|name| factory.model_name(name).to_owned())
        .collect();
    if let Some(tool) = SkillTool::new(Arc::clone(&skills)) {
        builtin_tools.insert(crate::toolset::Tool::spec(&tool).name.clone());
    }
    let facts = ReadOnlyFacts {
        server: server_info.clone(),
        slash_commands: crate::slash::commands(Some(&skills)),
        builtin_tools,
        hooks: HookEngine::new(config.hooks.clone(), session.work_dir.clone(), session.id.clone()),
        sandbox: sandbox.info(
            &session.work_dir,
            &start::stored_and_flag_dirs(&session, &options.add_dirs),
        ),
    };
    let opener = Opener {
        turns: server.turn_starter(),
        client: client.clone(),
        options,
        env: Arc::new(env),
        share_dir,
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
        signed_in: resolved.provider.oauth.is_some(),
        sandbox,
        provider_type: resolved.provider.kind.as_str().to_owned(),
        config: Arc::new(config),
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
        Err(e @ NotHeld::Open(_)) => return Err(AssembleError::Open(e)),
    }
    Ok(Assembled { server, gate })
}
