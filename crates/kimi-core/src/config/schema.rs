//! The configuration schema: every section of `config.toml`, its defaults and its limits.
//!
//! Field names, defaults and ranges follow the reference CLI's `config.py` so a config file written
//! for one implementation loads in the other. Unknown keys are ignored, as the reference does; the
//! loader reports them as warnings instead of failing.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    /// Alias (a key of [`Config::models`]) used when no `--model` is given; empty for none.
    pub default_model: String,
    /// Thinking mode when neither `--thinking` nor `--no-thinking` is given.
    pub default_thinking: bool,
    /// Auto-approve every action unless the session says otherwise.
    pub default_yolo: bool,
    /// Leave out the reminder that tells the model nobody is at the keyboard in afk mode.
    pub skip_afk_prompt_injection: bool,
    /// Start new sessions in plan mode.
    pub default_plan_mode: bool,
    /// External editor command for interactive front-ends (unused by the wire server).
    pub default_editor: String,
    /// Colour theme for interactive front-ends (unused by the wire server).
    pub theme: Theme,
    /// Whether interactive front-ends stream reasoning text (unused by the wire server).
    pub show_thinking_stream: bool,
    /// Models by alias.
    pub models: BTreeMap<String, ModelConfig>,
    /// Providers by name.
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Limits of the turn and step loop.
    pub loop_control: LoopControl,
    /// Background task runtime.
    pub background: BackgroundConfig,
    /// Notification runtime.
    pub notifications: NotificationConfig,
    /// Moonshot web services used by the search and fetch tools.
    pub services: Services,
    /// MCP client settings.
    pub mcp: McpConfig,
    /// Also load the stdio MCP servers configured for other agents (`~/.claude.json`,
    /// `~/.codex/config.toml`; seeds/003), ours winning on a name clash. Beyond the reference; off by
    /// default.
    pub mcp_discover: bool,
    /// What the model calls MCP tools: their own names (`plain`, the reference's) or
    /// `mcp__<server>__<tool>` (`prefixed`, seeds/003). Beyond the reference.
    pub mcp_tool_names: McpToolNames,
    /// Lifecycle hooks, run in order.
    pub hooks: Vec<HookDef>,
    /// Merge skills from every brand directory (kimi, claude, codex) instead of the first found.
    pub merge_all_available_skills: bool,
    /// More directories to discover skills in: absolute, `~`-relative or relative to the project root.
    pub extra_skill_dirs: Vec<String>,
    /// Anonymous telemetry (we send none; kept so reference config files round-trip).
    pub telemetry: bool,
    /// How the model's commands are confined (extension; `--sandbox` overrides it; docs/sandbox.md).
    pub sandbox_mode: crate::sandbox::SandboxMode,
    /// Whether the model's commands may use the network, loopback included (extension; default true).
    pub sandbox_network: bool,
    /// More directories (or files) commands may write in `workspace-write` mode: absolute, `~/...` or
    /// relative to the work dir (extension).
    pub sandbox_writable_roots: Vec<String>,
    /// Hosts FetchURL reads without asking (`example.com`, `*.example.com`, an IP address).
    pub fetch_allowed_hosts: Vec<String>,
    /// Hosts FetchURL may reach although they are (or resolve to) loopback, private, link-local or
    /// unique-local addresses; every other such address is refused.
    pub fetch_allow_private_hosts: Vec<String>,
    /// Whether `ApprovalRequest`s whose text the reference fixes also say what "approve for session"
    /// covers, and MCP ones show their arguments: `true` for every client, `false` for none (the
    /// reference's texts), unset for the clients that name themselves in `initialize`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_details: Option<bool>,
    /// `[shell_env]`: the environment of Shell commands, background tasks and hooks.
    pub shell_env: ShellEnvConfig,

    /// The file this configuration came from; `None` when it came from `--config` text.
    #[serde(skip)]
    pub source_file: Option<PathBuf>,
    /// Whether it came from the default location, `<share>/config.toml`.
    #[serde(skip)]
    pub is_from_default_location: bool,
    /// Things the loader tolerated, such as unknown keys, for the log.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            default_model: String::new(),
            default_thinking: false,
            default_yolo: false,
            skip_afk_prompt_injection: false,
            default_plan_mode: false,
            default_editor: String::new(),
            theme: Theme::Dark,
            show_thinking_stream: true,
            models: BTreeMap::new(),
            providers: BTreeMap::new(),
            loop_control: LoopControl::default(),
            background: BackgroundConfig::default(),
            notifications: NotificationConfig::default(),
            services: Services::default(),
            mcp: McpConfig::default(),
            mcp_discover: false,
            mcp_tool_names: McpToolNames::Plain,
            hooks: Vec::new(),
            merge_all_available_skills: true,
            extra_skill_dirs: Vec::new(),
            telemetry: true,
            sandbox_mode: crate::sandbox::SandboxMode::default(),
            sandbox_network: true,
            sandbox_writable_roots: Vec::new(),
            fetch_allowed_hosts: Vec::new(),
            fetch_allow_private_hosts: Vec::new(),
            approval_details: None,
            shell_env: ShellEnvConfig::default(),
            source_file: None,
            is_from_default_location: false,
            warnings: Vec::new(),
        }
    }
}

/// Colour theme of interactive front-ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Theme {
    /// For dark terminals (the default).
    Dark,
    /// For light terminals.
    Light,
}

/// The kind of API a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ProviderType {
    /// Moonshot's Kimi API (OpenAI-compatible chat completions plus extensions).
    #[serde(rename = "kimi")]
    Kimi,
    /// Any OpenAI-compatible chat completions endpoint.
    #[serde(rename = "openai_legacy")]
    OpenAiLegacy,
    /// The OpenAI Responses API.
    #[serde(rename = "openai_responses")]
    OpenAiResponses,
    /// Anthropic messages API.
    #[serde(rename = "anthropic")]
    Anthropic,
    /// Older spelling of [`ProviderType::Gemini`], kept for existing files.
    #[serde(rename = "google_genai")]
    GoogleGenai,
    /// Google Gemini API.
    #[serde(rename = "gemini")]
    Gemini,
    /// Gemini through Vertex AI.
    #[serde(rename = "vertexai")]
    VertexAi,
    /// Test provider that echoes the input back.
    #[serde(rename = "_echo")]
    Echo,
    /// Test provider that plays scripted replies (`KIMI_SCRIPTED_ECHO_SCRIPTS`).
    #[serde(rename = "_scripted_echo")]
    ScriptedEcho,
    /// Kimi wrapped in random failures, for testing retries.
    #[serde(rename = "_chaos")]
    Chaos,
    /// Answers from a cassette (`base_url` is its file) recorded with `--record-llm`.
    #[serde(rename = "_cassette")]
    Cassette,
}

impl ProviderType {
    /// The name used in config files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kimi => "kimi",
            Self::OpenAiLegacy => "openai_legacy",
            Self::OpenAiResponses => "openai_responses",
            Self::Anthropic => "anthropic",
            Self::GoogleGenai => "google_genai",
            Self::Gemini => "gemini",
            Self::VertexAi => "vertexai",
            Self::Echo => "_echo",
            Self::ScriptedEcho => "_scripted_echo",
            Self::Chaos => "_chaos",
            Self::Cassette => "_cassette",
        }
    }

    /// Whether the provider works without a base URL and a model name (the test providers).
    pub fn is_offline(self) -> bool {
        matches!(self, Self::Echo | Self::ScriptedEcho)
    }
}

impl fmt::Display for ProviderType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Something a model can do beyond plain text chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// Accepts images.
    ImageIn,
    /// Accepts videos.
    VideoIn,
    /// Can reason before answering; thinking can be switched on and off.
    Thinking,
    /// Always reasons; thinking cannot be switched off.
    AlwaysThinking,
}

impl Capability {
    /// Every capability, in config-file spelling order.
    pub const ALL: [Capability; 4] = [Self::ImageIn, Self::VideoIn, Self::Thinking, Self::AlwaysThinking];

    /// The name used in config files and in `KIMI_MODEL_CAPABILITIES`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ImageIn => "image_in",
            Self::VideoIn => "video_in",
            Self::Thinking => "thinking",
            Self::AlwaysThinking => "always_thinking",
        }
    }

    /// Parses a config-file name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is never shown in `Debug` output or logs.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether no secret is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("\"\"")
        } else {
            f.write_str("\"******\"")
        }
    }
}

/// Where OAuth credentials are kept (never in the config file itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthRef {
    /// Storage backend.
    #[serde(default)]
    pub storage: OAuthStorage,
    /// Key that locates the credentials in that storage.
    pub key: String,
}

/// Backend holding OAuth credentials.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OAuthStorage {
    /// The OS keyring.
    Keyring,
    /// A file under the share directory (the default).
    #[default]
    File,
}

/// One `[providers.<name>]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderConfig {
    /// The API it speaks.
    #[serde(rename = "type")]
    pub kind: ProviderType,
    /// API base URL (required, may be empty).
    pub base_url: String,
    /// API key (required, may be empty).
    pub api_key: Secret,
    /// Environment variables the provider needs (used by `vertexai` and `_scripted_echo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// Extra HTTP headers sent with every request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_headers: Option<BTreeMap<String, String>>,
    /// Message field carrying reasoning text for `openai_legacy`; see
    /// [`ProviderConfig::effective_reasoning_key`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_key: Option<String>,
    /// OAuth credential reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthRef>,
    /// `_cassette` only: compare each request with the recording (the default); `false` replays the
    /// recorded answers by order alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

impl ProviderConfig {
    /// A provider of `kind` with the given base URL and key and nothing else set.
    pub fn new(kind: ProviderType, base_url: impl Into<String>, api_key: impl Into<String>) -> Self {
        Self {
            kind,
            base_url: base_url.into(),
            api_key: Secret::new(api_key),
            env: None,
            custom_headers: None,
            reasoning_key: None,
            oauth: None,
            strict: None,
        }
    }

    /// The reasoning field name for `openai_legacy`: `reasoning_content` when unset; an empty
    /// string means reasoning is not sent back.
    pub fn effective_reasoning_key(&self) -> &str {
        self.reasoning_key.as_deref().unwrap_or("reasoning_content")
    }
}

/// One `[models.<alias>]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    /// Name of the provider (a key of [`Config::providers`]).
    pub provider: String,
    /// Model name sent to the API.
    pub model: String,
    /// Context window in tokens.
    pub max_context_size: u64,
    /// Declared capabilities; more are derived from the model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<BTreeSet<Capability>>,
    /// Human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
}

/// `[loop_control]`: limits of the agent loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoopControl {
    /// Most steps in one turn (>= 1). Also read as `max_steps_per_run`.
    #[serde(alias = "max_steps_per_run")]
    pub max_steps_per_turn: u64,
    /// Most retries of one step (>= 1).
    pub max_retries_per_step: u64,
    /// Extra iterations after the first turn in Ralph mode; -1 for unlimited.
    pub max_ralph_iterations: i64,
    /// Tokens kept free for the reply (>= 1000); compaction starts when the context would eat them.
    pub reserved_context_size: u64,
    /// Share of the context window that triggers compaction (0.5 ..= 0.99).
    pub compaction_trigger_ratio: f64,
}

impl Default for LoopControl {
    fn default() -> Self {
        Self {
            max_steps_per_turn: 1000,
            max_retries_per_step: 3,
            max_ralph_iterations: 0,
            reserved_context_size: 50_000,
            compaction_trigger_ratio: 0.85,
        }
    }
}

/// `[background]`: the background task runtime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BackgroundConfig {
    /// Most tasks running at once (>= 1).
    pub max_running_tasks: u64,
    /// Most bytes returned by one output read (>= 1024).
    pub read_max_bytes: u64,
    /// Output lines quoted in a completion notification (>= 1).
    pub notification_tail_lines: u64,
    /// Output characters quoted in a completion notification (>= 256).
    pub notification_tail_chars: u64,
    /// Poll interval while waiting for a task (>= 50).
    pub wait_poll_interval_ms: u64,
    /// Heartbeat interval of a task worker (>= 100).
    pub worker_heartbeat_interval_ms: u64,
    /// A worker silent this long is considered dead (>= 1000).
    pub worker_stale_after_ms: u64,
    /// Time between SIGTERM and SIGKILL (>= 100).
    pub kill_grace_period_ms: u64,
    /// Keep tasks running after the agent exits.
    pub keep_alive_on_exit: bool,
    /// Longest run of a background agent task (>= 60).
    pub agent_task_timeout_s: u64,
    /// Longest wait for tasks at the end of print mode (>= 1).
    pub print_wait_ceiling_s: u64,
}

impl Default for BackgroundConfig {
    fn default() -> Self {
        Self {
            max_running_tasks: 4,
            read_max_bytes: 30_000,
            notification_tail_lines: 20,
            notification_tail_chars: 3_000,
            wait_poll_interval_ms: 500,
            worker_heartbeat_interval_ms: 5_000,
            worker_stale_after_ms: 15_000,
            kill_grace_period_ms: 2_000,
            keep_alive_on_exit: false,
            agent_task_timeout_s: 900,
            print_wait_ceiling_s: 3600,
        }
    }
}

impl BackgroundConfig {
    /// [`BackgroundConfig::kill_grace_period_ms`] as a duration.
    pub fn kill_grace_period(&self) -> Duration {
        Duration::from_millis(self.kill_grace_period_ms)
    }
}

/// `[notifications]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NotificationConfig {
    /// A claimed notification not delivered within this time may be claimed again (>= 1000).
    pub claim_stale_after_ms: u64,
}

impl Default for NotificationConfig {
    fn default() -> Self {
        Self {
            claim_stale_after_ms: 15_000,
        }
    }
}

/// `[services]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Services {
    /// Web search service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moonshot_search: Option<ServiceConfig>,
    /// Web fetch service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moonshot_fetch: Option<ServiceConfig>,
}

/// `[services.moonshot_search]` or `[services.moonshot_fetch]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceConfig {
    /// Service base URL.
    pub base_url: String,
    /// Service API key.
    pub api_key: Secret,
    /// Extra HTTP headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_headers: Option<BTreeMap<String, String>>,
    /// OAuth credential reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthRef>,
}

/// `[shell_env]`: what environment the commands the agent starts get (Shell, background tasks,
/// hooks; MCP servers get their own `env`). Applied in order: `inherit`, `exclude`, `include_only`,
/// then `set`. Name patterns use `*` and `?` and ignore letter case.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ShellEnvConfig {
    /// Where to start from.
    pub inherit: ShellEnvInherit,
    /// Patterns of names to leave out.
    pub exclude: Vec<String>,
    /// When not empty, only names matching one of these patterns are kept.
    pub include_only: Vec<String>,
    /// Variables to set (after everything else, so they always apply).
    pub set: BTreeMap<String, String>,
}

/// `[shell_env] inherit`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShellEnvInherit {
    /// The agent's environment without names containing `KEY`, `SECRET` or `TOKEN` (any letter case)
    /// and without the model providers' own variables.
    #[default]
    Filtered,
    /// The agent's whole environment (the reference's behaviour).
    All,
    /// Nothing: only what `set` gives.
    None,
}

/// `[mcp]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct McpConfig {
    /// `[mcp.client]`.
    pub client: McpClientConfig,
}

/// How MCP tools are named for the model (`mcp_tool_names`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum McpToolNames {
    /// The tool's own name, as the server lists it (the reference's).
    #[default]
    Plain,
    /// `mcp__<server>__<tool>`: two servers' tools never clash, and the model sees where each comes
    /// from (seeds/003).
    Prefixed,
}

/// `[mcp.client]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct McpClientConfig {
    /// Timeout of one MCP tool call.
    pub tool_call_timeout_ms: u64,
}

impl Default for McpClientConfig {
    fn default() -> Self {
        Self {
            tool_call_timeout_ms: 60_000,
        }
    }
}

impl McpClientConfig {
    /// [`McpClientConfig::tool_call_timeout_ms`] as a duration.
    pub fn tool_call_timeout(&self) -> Duration {
        Duration::from_millis(self.tool_call_timeout_ms)
    }
}

/// Lifecycle event a hook can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum HookEvent {
    /// Before a tool runs.
    PreToolUse,
    /// After a tool succeeded.
    PostToolUse,
    /// After a tool failed.
    PostToolUseFailure,
    /// When the user submits a prompt.
    UserPromptSubmit,
    /// When a turn ends.
    Stop,
    /// When a turn ends with an error.
    StopFailure,
    /// When a session starts or resumes.
    SessionStart,
    /// When a session ends.
    SessionEnd,
    /// When a subagent starts.
    SubagentStart,
    /// When a subagent stops.
    SubagentStop,
    /// Before compaction.
    PreCompact,
    /// After compaction.
    PostCompact,
    /// When a notification is raised.
    Notification,
}

/// One `[[hooks]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookDef {
    /// Event that triggers the hook.
    pub event: HookEvent,
    /// Shell command; it gets the event as JSON on stdin.
    pub command: String,
    /// Regex filtering the event's subject; empty matches everything.
    #[serde(default)]
    pub matcher: String,
    /// Seconds before the hook is abandoned (1 ..= 600); a timed-out hook does not block.
    #[serde(default = "default_hook_timeout")]
    pub timeout: u64,
    /// What a hook that fails (cannot start, times out, crashes) decides.
    #[serde(default, skip_serializing_if = "HookOnError::is_allow")]
    pub on_error: HookOnError,
}

/// `[[hooks]] on_error`: what a hook that fails to decide means.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookOnError {
    /// Fail open, as the reference: the action goes ahead.
    #[default]
    Allow,
    /// Fail closed: the action is blocked, the failure is the reason.
    Block,
}

impl HookOnError {
    fn is_allow(&self) -> bool {
        *self == Self::Allow
    }
}

fn default_hook_timeout() -> u64 {
    30
}

impl HookDef {
    /// [`HookDef::timeout`] as a duration.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout)
    }
}

/// One problem found while validating a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Dotted path of the offending key, such as `loop_control.max_steps_per_turn`.
    pub key: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

impl Config {
    /// Checks the limits the types cannot express, and that every model alias and provider
    /// referenced exists. Returns every problem found, in file order.
    pub fn validate(&self) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        let mut min = |key: &str, value: u64, least: u64| {
            if value < least {
                issues.push(ConfigIssue {
                    key: key.to_owned(),
                    message: format!("must be greater than or equal to {least} (got {value})"),
                });
            }
        };

        let lc = &self.loop_control;
        min("loop_control.max_steps_per_turn", lc.max_steps_per_turn, 1);
        min("loop_control.max_retries_per_step", lc.max_retries_per_step, 1);
        min(
            "loop_control.reserved_context_size",
            lc.reserved_context_size,
            1000,
        );

        let bg = &self.background;
        min("background.max_running_tasks", bg.max_running_tasks, 1);
        min("background.read_max_bytes", bg.read_max_bytes, 1024);
        min(
            "background.notification_tail_lines",
            bg.notification_tail_lines,
            1,
        );
        min(
            "background.notification_tail_chars",
            bg.notification_tail_chars,
            256,
        );
        min("background.wait_poll_interval_ms", bg.wait_poll_interval_ms, 50);
        min(
            "background.worker_heartbeat_interval_ms",
            bg.worker_heartbeat_interval_ms,
            100,
        );
        min("background.worker_stale_after_ms", bg.worker_stale_after_ms, 1000);
        min("background.kill_grace_period_ms", bg.kill_grace_period_ms, 100);
        min("background.agent_task_timeout_s", bg.agent_task_timeout_s, 60);
        min("background.print_wait_ceiling_s", bg.print_wait_ceiling_s, 1);

        min(
            "notifications.claim_stale_after_ms",
            self.notifications.claim_stale_after_ms,
            1000,
        );

        for (i, hook) in self.hooks.iter().enumerate() {
            min(&format!("hooks[{i}].timeout"), hook.timeout, 1);
        }

        if lc.max_ralph_iterations < -1 {
            issues.push(ConfigIssue {
                key: "loop_control.max_ralph_iterations".to_owned(),
                message: format!(
                    "must be greater than or equal to -1 (got {})",
                    lc.max_ralph_iterations
                ),
            });
        }
        let ratio = lc.compaction_trigger_ratio;
        if !(0.5..=0.99).contains(&ratio) {
            issues.push(ConfigIssue {
                key: "loop_control.compaction_trigger_ratio".to_owned(),
                message: format!("must be between 0.5 and 0.99 (got {ratio})"),
            });
        }
        for (i, hook) in self.hooks.iter().enumerate() {
            if hook.timeout > 600 {
                issues.push(ConfigIssue {
                    key: format!("hooks[{i}].timeout"),
                    message: format!("must be less than or equal to 600 (got {})", hook.timeout),
                });
            }
        }

        // Reference: the model validator runs after the fields and uses these exact words.
        if !self.default_model.is_empty() && !self.models.contains_key(&self.default_model) {
            issues.push(ConfigIssue {
                key: "default_model".to_owned(),
                message: format!("Default model {} not found in models", self.default_model),
            });
        }
        for (alias, model) in &self.models {
            if !self.providers.contains_key(&model.provider) {
                issues.push(ConfigIssue {
                    key: format!("models.{alias}.provider"),
                    message: format!("Provider {} not found in providers", model.provider),
                });
            }
        }
        issues
    }

    /// Thinking for a new LLM: the `--thinking`/`--no-thinking` flag, else `default_thinking`.
    pub fn thinking(&self, cli: Option<bool>) -> bool {
        cli.unwrap_or(self.default_thinking)
    }

    /// Yolo for this run: `--yolo` or `default_yolo`.
    pub fn yolo(&self, cli: bool) -> bool {
        cli || self.default_yolo
    }

    /// Plan mode for a *new* session: `--plan` or `default_plan_mode` (a resumed session keeps
    /// its own).
    pub fn plan_mode(&self, cli: bool) -> bool {
        cli || self.default_plan_mode
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_reference() {
        let c = Config::default();
        assert_eq!(c.loop_control.max_steps_per_turn, 1000);
        assert_eq!(c.loop_control.max_retries_per_step, 3);
        assert_eq!(c.loop_control.max_ralph_iterations, 0);
        assert_eq!(c.loop_control.reserved_context_size, 50_000);
        assert!((c.loop_control.compaction_trigger_ratio - 0.85).abs() < f64::EPSILON);
        assert_eq!(c.background.max_running_tasks, 4);
        assert_eq!(c.background.print_wait_ceiling_s, 3600);
        assert_eq!(c.notifications.claim_stale_after_ms, 15_000);
        assert_eq!(c.mcp.client.tool_call_timeout(), Duration::from_secs(60));
        assert!(c.merge_all_available_skills && c.telemetry && c.show_thinking_stream);
        assert_eq!(c.theme, Theme::Dark);
        assert!(c.validate().is_empty());
    }

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let p = ProviderConfig::new(ProviderType::Kimi, "https://x", "sk-123");
        assert!(!format!("{p:?}").contains("sk-123"));
        assert_eq!(p.api_key.expose(), "sk-123");
    }

    #[test]
    fn reasoning_key_defaults_to_reasoning_content_and_empty_disables_it() {
        let mut p = ProviderConfig::new(ProviderType::OpenAiLegacy, "u", "k");
        assert_eq!(p.effective_reasoning_key(), "reasoning_content");
        p.reasoning_key = Some(String::new());
        assert_eq!(p.effective_reasoning_key(), "");
    }

    #[test]
    fn validation_reports_every_range_and_reference_problem() {
        let mut c = Config::default();
        c.loop_control.max_steps_per_turn = 0;
        c.loop_control.max_ralph_iterations = -2;
        c.loop_control.compaction_trigger_ratio = 1.0;
        c.loop_control.reserved_context_size = 999;
        c.default_model = "nope".into();
        c.models.insert(
            "m".into(),
            ModelConfig {
                provider: "ghost".into(),
                model: "x".into(),
                max_context_size: 1,
                capabilities: None,
                display_name: None,
            },
        );
        c.hooks.push(HookDef {
            event: HookEvent::Stop,
            command: "true".into(),
            matcher: String::new(),
            timeout: 601,
            on_error: HookOnError::Allow,
        });
        let keys: Vec<String> = c.validate().into_iter().map(|i| i.key).collect();
        assert_eq!(
            keys,
            [
                "loop_control.max_steps_per_turn",
                "loop_control.reserved_context_size",
                "loop_control.max_ralph_iterations",
                "loop_control.compaction_trigger_ratio",
                "hooks[0].timeout",
                "default_model",
                "models.m.provider",
            ]
        );
    }

    #[test]
    fn cli_flags_win_over_defaults() {
        let c = Config {
            default_thinking: true,
            default_yolo: true,
            ..Config::default()
        };
        assert!(!c.thinking(Some(false)));
        assert!(c.thinking(None));
        assert!(c.yolo(false));
        assert!(!c.plan_mode(false));
    }
}
