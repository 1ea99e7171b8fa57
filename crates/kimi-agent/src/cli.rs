//! Command-line flags and subcommands.
//!
//! Every flag the reference CLI's wire harness and the official SDKs pass is accepted under the
//! reference's names and aliases. kimi-agent always runs the Wire server, so `--wire` is accepted
//! and optional. The reference's other UIs (`--print`, `--acp`, `--prompt`, ...) are parsed only to
//! be refused with a clear message instead of clap's "unexpected argument".
//!
//! Parsing is two-step, like the reference (click checks each value, then the command checks how
//! the flags combine): [`Cli::parse`] / [`Cli::try_parse`], then [`Cli::validate`]. Both report
//! errors as [`clap::Error`]s, so `err.exit()` prints usage and exits with status 2.

use std::path::{Path, PathBuf};

use clap::error::ErrorKind;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

/// A headless coding agent speaking the Kimi Wire protocol over stdio.
#[derive(Debug, Clone, PartialEq, Eq, Parser)]
#[command(name = "kimi-agent", version, about, long_about = None)]
pub struct Cli {
    /// Print verbose information.
    #[arg(long)]
    pub verbose: bool,

    /// Log debug information.
    #[arg(long)]
    pub debug: bool,

    /// Working directory for the agent. Default: the current directory.
    #[arg(short = 'w', long = "work-dir", value_name = "DIR")]
    pub work_dir: Option<PathBuf>,

    /// Add a directory to the workspace scope (repeatable).
    #[arg(long = "add-dir", value_name = "DIR")]
    pub add_dirs: Vec<PathBuf>,

    /// Resume the session with this ID, or create it when there is none.
    #[arg(
        short = 'S',
        long = "session",
        visible_alias = "resume",
        visible_short_alias = 'r',
        value_name = "ID",
        num_args = 0..=1,
        default_missing_value = ""
    )]
    pub session: Option<String>,

    /// Continue the previous session of the working directory.
    #[arg(short = 'C', long = "continue")]
    pub continue_session: bool,

    /// Configuration as TOML or JSON text.
    #[arg(long = "config", value_name = "TEXT")]
    pub config: Option<String>,

    /// Configuration file, JSON when named *.json, else TOML. Default: ~/.kimi/config.toml.
    #[arg(long = "config-file", value_name = "FILE")]
    pub config_file: Option<PathBuf>,

    /// Model alias from the configuration. Default: default_model.
    #[arg(short = 'm', long = "model", value_name = "ALIAS")]
    pub model: Option<String>,

    /// Enable thinking mode. Default: default_thinking from the configuration.
    #[arg(long, overrides_with = "no_thinking")]
    pub thinking: bool,

    /// Disable thinking mode.
    #[arg(long = "no-thinking", overrides_with = "thinking")]
    pub no_thinking: bool,

    /// Approve every action automatically.
    #[arg(
        short = 'y',
        long = "yolo",
        visible_aliases = ["yes", "auto-approve"]
    )]
    pub yolo: bool,

    /// Start in plan mode.
    #[arg(long)]
    pub plan: bool,

    /// Away-from-keyboard mode: questions are dismissed and tool calls approved.
    #[arg(long)]
    pub afk: bool,

    /// Run as the Wire server (the only mode; accepted for compatibility).
    #[arg(long)]
    pub wire: bool,

    /// Built-in agent to use.
    #[arg(long, value_enum, value_name = "NAME")]
    pub agent: Option<BuiltinAgent>,

    /// Custom agent specification file.
    #[arg(long = "agent-file", value_name = "FILE")]
    pub agent_file: Option<PathBuf>,

    /// MCP config file to load (repeatable). Default: ~/.kimi/mcp.json when none is given.
    #[arg(long = "mcp-config-file", value_name = "FILE")]
    pub mcp_config_files: Vec<PathBuf>,

    /// MCP config JSON to load (repeatable).
    #[arg(long = "mcp-config", value_name = "JSON")]
    pub mcp_configs: Vec<String>,

    /// Skills directory (repeatable); replaces the default discovery.
    #[arg(long = "skills-dir", value_name = "DIR")]
    pub skills_dirs: Vec<PathBuf>,

    /// Most steps in one turn. Default: from the configuration.
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub max_steps_per_turn: Option<u64>,

    /// Most retries of one step. Default: from the configuration.
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub max_retries_per_step: Option<u64>,

    /// Extra iterations after the first turn in Ralph mode; -1 for unlimited.
    #[arg(long, value_name = "N", value_parser = at_least_minus_one, allow_hyphen_values = true)]
    pub max_ralph_iterations: Option<i64>,

    /// Confine the model's commands: read-only, workspace-write or danger-full-access (no
    /// confinement). Default: sandbox_mode from the configuration (danger-full-access).
    #[arg(long, value_name = "MODE", value_parser = parse_sandbox_mode)]
    pub sandbox: Option<kimi_core::SandboxMode>,
    /// Append every model call (request and answer) to FILE, a cassette a `_cassette` provider
    /// replays (docs/testing-with-cassettes.md).
    #[arg(long = "record-llm", value_name = "FILE")]
    pub record_llm: Option<PathBuf>,

    /// Unsupported UI modes and options of the reference CLI, refused by [`Cli::validate`].
    #[command(flatten)]
    pub unsupported: Unsupported,

    /// Subcommand; none runs the Wire server.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Options of the reference CLI's other UIs. They are parsed (hidden from help) so that
/// [`Cli::validate`] can say why they are refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct Unsupported {
    /// The reference's print UI.
    #[arg(long = "print", hide = true)]
    pub print: bool,
    /// The reference's ACP server.
    #[arg(long = "acp", hide = true)]
    pub acp: bool,
    /// An initial prompt, which the Wire server does not take.
    #[arg(
        short = 'p',
        long = "prompt",
        visible_short_alias = 'c',
        visible_alias = "command",
        hide = true
    )]
    pub prompt: Option<String>,
    /// Print-UI option.
    #[arg(long = "input-format", hide = true)]
    pub input_format: Option<String>,
    /// Print-UI option.
    #[arg(long = "output-format", hide = true)]
    pub output_format: Option<String>,
    /// Print-UI option.
    #[arg(long = "final-message-only", hide = true)]
    pub final_message_only: bool,
    /// Print-UI option.
    #[arg(long = "quiet", hide = true)]
    pub quiet: bool,
}

/// Built-in agent specifications.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BuiltinAgent {
    /// The default agent.
    Default,
    /// The Okabe agent.
    Okabe,
    /// The tool set of Kimi Code (`Read`, `Write`, `Edit`, `Bash`, ...; shared/seeds/002).
    KimiCode,
}

impl BuiltinAgent {
    /// The agent file this built-in agent loads, or `None` for the default agent (the reference's
    /// `okabe` differs from it only in its prompt, which we do not have, so it runs as the default).
    pub fn agent_file(self) -> Option<&'static str> {
        match self {
            Self::Default | Self::Okabe => None,
            Self::KimiCode => Some(kimi_core::KIMI_CODE_AGENT),
        }
    }
}

/// Subcommands.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Show version and protocol information.
    Info(InfoArgs),
    /// Manage MCP server configurations.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Login to your Kimi account.
    Login(AccountArgs),
    /// Logout from your Kimi account.
    Logout(AccountArgs),
    /// Model-traffic cassettes (docs/testing-with-cassettes.md).
    #[command(subcommand)]
    Cassette(CassetteCommand),
}

/// `cassette` subcommands.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum CassetteCommand {
    /// Write a cassette rebuilt from a recorded session's files.
    #[command(name = "from-session")]
    FromSession {
        /// The session directory (`~/.kimi/sessions/<hash>/<id>`).
        #[arg(value_name = "SESSION_DIR")]
        session_dir: PathBuf,
        /// Write the cassette to FILE instead of stdout.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

/// `login` and `logout` options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct AccountArgs {
    /// Emit OAuth events as JSON lines.
    #[arg(long)]
    pub json: bool,
}

/// `info` options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct InfoArgs {
    /// Output the information as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `mcp` subcommands, editing `<share>/mcp.json`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum McpCommand {
    /// Add an MCP server.
    Add(McpAddArgs),
    /// List the configured MCP servers.
    List,
    /// Remove an MCP server.
    Remove {
        /// Name of the MCP server to remove.
        name: String,
    },
    /// Connect to an MCP server and list its tools.
    Test {
        /// Name of the MCP server to test.
        name: String,
    },
    /// Authorize with an OAuth-enabled MCP server.
    Auth {
        /// Name of the MCP server to authorize.
        name: String,
    },
    /// Reset OAuth authorization for an MCP server (clear stored tokens).
    #[command(name = "reset-auth")]
    ResetAuth {
        /// Name of the MCP server to reset authorization.
        name: String,
    },
}

/// `mcp add` arguments.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct McpAddArgs {
    /// Name of the MCP server to add.
    pub name: String,
    /// For http: the server URL. For stdio: the command to run, after `--` (options may also follow
    /// the name or the URL, as in the reference).
    #[arg(value_name = "TARGET_OR_COMMAND")]
    pub target: Vec<String>,
    /// Transport type.
    #[arg(short = 't', long, value_enum, default_value_t = McpTransport::Stdio)]
    pub transport: McpTransport,
    /// Environment variable for a stdio server, KEY=VALUE (repeatable).
    #[arg(short = 'e', long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// HTTP header for an http server, KEY:VALUE (repeatable).
    #[arg(short = 'H', long = "header", value_name = "KEY:VALUE")]
    pub headers: Vec<String>,
    /// Authorization type, such as `oauth` (http only).
    #[arg(short = 'a', long)]
    pub auth: Option<String>,
}

/// MCP transports `mcp add` can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum McpTransport {
    /// A child process speaking over stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
}

impl Cli {
    /// `Some(true)` for `--thinking`, `Some(false)` for `--no-thinking` (the last one given wins,
    /// as in the reference), `None` for neither.
    pub fn thinking(&self) -> Option<bool> {
        match (self.thinking, self.no_thinking) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        }
    }

    /// Where the configuration comes from: `--config` text, `--config-file`, or the default file.
    pub fn config_source(&self) -> kimi_core::ConfigSource {
        use kimi_core::ConfigSource;
        match (&self.config, &self.config_file) {
            (Some(text), _) => ConfigSource::Inline(text.clone()),
            (None, Some(path)) => ConfigSource::File(path.clone()),
            (None, None) => ConfigSource::Default,
        }
    }

    /// The `--session` ID, trimmed; `None` when the flag is absent.
    pub fn session_id(&self) -> Option<&str> {
        self.session.as_deref().map(str::trim).filter(|s| !s.is_empty())
    }

    /// Checks what clap cannot: that paths exist and are of the right kind, that flags that
    /// exclude each other are not combined, and that no unsupported UI option is used. Messages
    /// follow the reference's wording.
    pub fn validate(&self) -> Result<(), clap::Error> {
        self.check_paths()?;
        self.check_unsupported()?;
        self.check_session_id()?;

        // Reference: each group is checked in this order, naming the flags in this order.
        let groups: [&[(&str, bool)]; 3] = [
            &[
                ("--agent", self.agent.is_some()),
                ("--agent-file", self.agent_file.is_some()),
            ],
            &[
                ("--continue", self.continue_session),
                ("--session", self.session.is_some()),
            ],
            &[
                ("--config", self.config.is_some()),
                ("--config-file", self.config_file.is_some()),
            ],
        ];
        for group in groups {
            let active: Vec<&str> = group
                .iter()
                .filter(|(_, on)| *on)
                .map(|(flag, _)| *flag)
                .collect();
            if let [first, _, ..] = active.as_slice() {
                return Err(bad_parameter(
                    ErrorKind::ArgumentConflict,
                    first,
                    &format!("Cannot combine {}.", active.join(", ")),
                ));
            }
        }

        if self.session.is_some() && self.session_id().is_none() {
            return Err(bad_parameter(
                ErrorKind::InvalidValue,
                "--session",
                "--session without a session ID is only supported for shell UI",
            ));
        }
        if let Some(config) = &self.config
            && config.trim().is_empty()
        {
            return Err(bad_parameter(
                ErrorKind::InvalidValue,
                "--config",
                "Config cannot be empty",
            ));
        }
        Ok(())
    }

    /// A usage error for `flag` in the reference's wording (exit status 2), for problems found
    /// after parsing, such as `--config` text that is not a valid configuration.
    pub fn bad_parameter(flag: &str, message: &str) -> clap::Error {
        bad_parameter(ErrorKind::InvalidValue, flag, message)
    }

    /// A session id becomes a directory name: one that could leave the sessions directory (`/`, `..`)
    /// is refused. The reference joins any id into a path; we do not let a client write elsewhere.
    fn check_session_id(&self) -> Result<(), clap::Error> {
        let Some(id) = self.session_id() else {
            return Ok(());
        };
        let escapes = id.is_empty() || id == "." || id == ".." || id.contains(['/', '\\', '\0']);
        if escapes {
            return Err(bad_parameter(
                ErrorKind::InvalidValue,
                "--session",
                &format!("'{id}' is not a valid session id: it must be a plain name without '/' or '..'."),
            ));
        }
        Ok(())
    }

    fn check_paths(&self) -> Result<(), clap::Error> {
        let dirs = self
            .work_dir
            .iter()
            .map(|p| ("--work-dir", p))
            .chain(self.add_dirs.iter().map(|p| ("--add-dir", p)))
            .chain(self.skills_dirs.iter().map(|p| ("--skills-dir", p)));
        for (flag, path) in dirs {
            check_path(flag, path, PathKind::Dir)?;
        }
        let files = self
            .config_file
            .iter()
            .map(|p| ("--config-file", p))
            .chain(self.agent_file.iter().map(|p| ("--agent-file", p)))
            .chain(self.mcp_config_files.iter().map(|p| ("--mcp-config-file", p)));
        for (flag, path) in files {
            check_path(flag, path, PathKind::File)?;
        }
        Ok(())
    }

    fn check_unsupported(&self) -> Result<(), clap::Error> {
        let u = &self.unsupported;
        let refused = [
            (
                "--print",
                u.print,
                "print mode is not supported; kimi-agent only runs the Wire server",
            ),
            (
                "--acp",
                u.acp,
                "ACP mode is not supported; kimi-agent only runs the Wire server",
            ),
            (
                "--prompt",
                u.prompt.is_some(),
                "the Wire server does not take an initial prompt",
            ),
            (
                "--input-format",
                u.input_format.is_some(),
                "only supported for print UI",
            ),
            (
                "--output-format",
                u.output_format.is_some(),
                "only supported for print UI",
            ),
            (
                "--final-message-only",
                u.final_message_only,
                "only supported for print UI",
            ),
            ("--quiet", u.quiet, "only supported for print UI"),
        ];
        match refused.into_iter().find(|(_, used, _)| *used) {
            Some((flag, _, why)) => Err(bad_parameter(ErrorKind::ArgumentConflict, flag, why)),
            None => Ok(()),
        }
    }
}

#[derive(Clone, Copy)]
enum PathKind {
    File,
    Dir,
}

/// Reference (click's path checks): the path must exist and be a file or a directory as asked.
fn check_path(flag: &str, path: &Path, kind: PathKind) -> Result<(), clap::Error> {
    let shown = path.display();
    let problem = match (kind, std::fs::metadata(path)) {
        (PathKind::File, Err(_)) => Some(format!("File '{shown}' does not exist.")),
        (PathKind::Dir, Err(_)) => Some(format!("Directory '{shown}' does not exist.")),
        (PathKind::File, Ok(meta)) if meta.is_dir() => Some(format!("File '{shown}' is a directory.")),
        (PathKind::Dir, Ok(meta)) if !meta.is_dir() => Some(format!("Directory '{shown}' is a file.")),
        _ => None,
    };
    match problem {
        Some(message) => Err(bad_parameter(
            ErrorKind::InvalidValue,
            &format!("'{flag}'"),
            &message,
        )),
        None => Ok(()),
    }
}

/// An error in the reference's `Invalid value for FLAG: MESSAGE` form, with our usage line.
fn bad_parameter(kind: ErrorKind, flag: &str, message: &str) -> clap::Error {
    Cli::command().error(kind, format!("Invalid value for {flag}: {message}"))
}

fn parse_sandbox_mode(raw: &str) -> Result<kimi_core::SandboxMode, String> {
    raw.parse()
}

fn parse_int(raw: &str) -> Result<i64, String> {
    raw.trim()
        .parse()
        .map_err(|_| format!("'{raw}' is not a valid integer."))
}

fn at_least_one(raw: &str) -> Result<u64, String> {
    let n = parse_int(raw)?;
    u64::try_from(n)
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(|| format!("{n} is not in the range x>=1."))
}

fn at_least_minus_one(raw: &str) -> Result<i64, String> {
    let n = parse_int(raw)?;
    if n >= -1 {
        Ok(n)
    } else {
        Err(format!("{n} is not in the range x>=-1."))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("kimi-agent").chain(args.iter().copied()))
    }

    fn ok(args: &[&str]) -> Cli {
        match parse(args) {
            Ok(cli) => cli,
            Err(e) => panic!("{args:?} did not parse: {e}"),
        }
    }

    fn validation_error(args: &[&str]) -> String {
        match ok(args).validate() {
            Ok(()) => panic!("{args:?} passed validation"),
            Err(e) => {
                assert_eq!(e.exit_code(), 2);
                e.to_string()
            }
        }
    }

    #[test]
    fn verify_command() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_sdk_command_line_parses() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let cli = ok(&[
            "--work-dir",
            d,
            "--wire",
            "--session",
            "abc",
            "--model",
            "k2",
            "--thinking",
            "--yolo",
            "--skills-dir",
            d,
            "--skills-dir",
            d,
        ]);
        assert_eq!(cli.work_dir.as_deref(), Some(dir.path()));
        assert!(cli.wire && cli.yolo);
        assert_eq!(cli.session_id(), Some("abc"));
        assert_eq!(cli.model.as_deref(), Some("k2"));
        assert_eq!(cli.thinking(), Some(true));
        assert_eq!(cli.skills_dirs.len(), 2);
        assert_eq!(cli.command, None);
        cli.validate().unwrap();
    }

    #[test]
    fn short_and_long_aliases() {
        for args in [["-S", "x"], ["--resume", "x"], ["-r", "x"], ["--session", "x"]] {
            assert_eq!(ok(&args).session_id(), Some("x"), "{args:?}");
        }
        for flag in ["-y", "--yes", "--yolo", "--auto-approve"] {
            assert!(ok(&[flag]).yolo, "{flag}");
        }
        assert!(ok(&["-C"]).continue_session);
        assert_eq!(ok(&["-m", "a"]).model.as_deref(), Some("a"));
        assert_eq!(ok(&["-w", "/tmp"]).work_dir, Some(PathBuf::from("/tmp")));
        assert_eq!(ok(&["--session=x"]).session_id(), Some("x"));
    }

    #[test]
    fn thinking_flags_last_one_wins() {
        assert_eq!(ok(&[]).thinking(), None);
        assert_eq!(ok(&["--no-thinking"]).thinking(), Some(false));
        assert_eq!(ok(&["--no-thinking", "--thinking"]).thinking(), Some(true));
        assert_eq!(ok(&["--thinking", "--no-thinking"]).thinking(), Some(false));
    }

    #[test]
    fn repeatable_flags_collect_in_order() {
        let cli = ok(&[
            "--add-dir",
            "/a",
            "--add-dir",
            "/b",
            "--mcp-config",
            "{}",
            "--mcp-config",
            "[]",
            "--mcp-config-file",
            "/x.json",
            "--mcp-config-file",
            "/y.json",
        ]);
        assert_eq!(cli.add_dirs, [PathBuf::from("/a"), PathBuf::from("/b")]);
        assert_eq!(cli.mcp_configs, ["{}", "[]"]);
        assert_eq!(
            cli.mcp_config_files,
            [PathBuf::from("/x.json"), PathBuf::from("/y.json")]
        );
    }

    #[test]
    fn sandbox_takes_codex_mode_names() {
        use kimi_core::SandboxMode;
        assert_eq!(ok(&[]).sandbox, None);
        for mode in SandboxMode::ALL {
            assert_eq!(ok(&["--sandbox", mode.as_str()]).sandbox, Some(mode));
        }
        let error = parse(&["--sandbox", "strict"]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::ValueValidation);
        assert!(
            error.to_string().contains(
                "'strict' is not a sandbox mode (read-only, workspace-write or danger-full-access)"
            ),
            "{error}"
        );
    }

    #[test]
    fn numbers_are_range_checked_like_the_reference() {
        let err = parse(&["--max-steps-per-turn", "0"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("0 is not in the range x>=1."), "{err}");
        let err = parse(&["--max-retries-per-step", "abc"]).unwrap_err();
        assert!(err.to_string().contains("'abc' is not a valid integer."), "{err}");
        let err = parse(&["--max-ralph-iterations", "-2"]).unwrap_err();
        assert!(err.to_string().contains("-2 is not in the range x>=-1."), "{err}");
        let cli = ok(&[
            "--max-steps-per-turn",
            "1",
            "--max-retries-per-step",
            "5",
            "--max-ralph-iterations",
            "-1",
        ]);
        assert_eq!(
            (
                cli.max_steps_per_turn,
                cli.max_retries_per_step,
                cli.max_ralph_iterations
            ),
            (Some(1), Some(5), Some(-1))
        );
    }

    #[test]
    fn agent_is_default_or_okabe() {
        assert_eq!(ok(&["--agent", "okabe"]).agent, Some(BuiltinAgent::Okabe));
        assert_eq!(ok(&["--agent", "default"]).agent, Some(BuiltinAgent::Default));
        assert_eq!(ok(&["--agent", "kimi-code"]).agent, Some(BuiltinAgent::KimiCode));
        assert!(parse(&["--agent", "other"]).is_err());
    }

    #[test]
    fn conflicting_flags_are_refused_with_the_reference_message() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agent.yaml");
        std::fs::write(&file, "").unwrap();
        let f = file.to_str().unwrap();
        let msg = validation_error(&["--agent", "okabe", "--agent-file", f]);
        assert!(
            msg.contains("Invalid value for --agent: Cannot combine --agent, --agent-file."),
            "{msg}"
        );
        let msg = validation_error(&["--continue", "--session", "x"]);
        assert!(
            msg.contains("Invalid value for --continue: Cannot combine --continue, --session."),
            "{msg}"
        );
        let msg = validation_error(&["--config", "{}", "--config-file", f]);
        assert!(
            msg.contains("Invalid value for --config: Cannot combine --config, --config-file."),
            "{msg}"
        );
    }

    #[test]
    fn session_without_an_id_is_refused() {
        let cli = ok(&["--session"]);
        assert_eq!(cli.session.as_deref(), Some(""));
        let msg = validation_error(&["--session", "--wire"]);
        assert!(
            msg.contains("--session without a session ID is only supported for shell UI"),
            "{msg}"
        );
        let msg = validation_error(&["-S", "  "]);
        assert!(msg.contains("only supported for shell UI"), "{msg}");
    }

    #[test]
    fn missing_paths_are_refused_like_click_does() {
        let msg = validation_error(&["--config-file", "/definitely/not/here.toml"]);
        assert!(
            msg.contains(
                "Invalid value for '--config-file': File '/definitely/not/here.toml' does not exist."
            ),
            "{msg}"
        );
        let msg = validation_error(&["--work-dir", "/definitely/not/here"]);
        assert!(
            msg.contains("Directory '/definitely/not/here' does not exist."),
            "{msg}"
        );
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let msg = validation_error(&["--agent-file", d]);
        assert!(msg.contains("is a directory."), "{msg}");
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        let msg = validation_error(&["--skills-dir", file.to_str().unwrap()]);
        assert!(msg.contains("is a file."), "{msg}");
    }

    #[test]
    fn other_ui_modes_are_refused_clearly() {
        for args in [
            &["--print"][..],
            &["--acp"],
            &["-p", "hi"],
            &["--command", "hi"],
            &["--quiet"],
        ] {
            let msg = validation_error(args);
            assert!(msg.contains("Invalid value for --"), "{msg}");
        }
        let msg = validation_error(&["--print", "--wire"]);
        assert!(msg.contains("only runs the Wire server"), "{msg}");
    }

    #[test]
    fn blank_inline_config_is_refused() {
        let msg = validation_error(&["--config", "  "]);
        assert!(
            msg.contains("Invalid value for --config: Config cannot be empty"),
            "{msg}"
        );
    }

    #[test]
    fn subcommands_parse() {
        assert_eq!(
            ok(&["info"]).command,
            Some(Command::Info(InfoArgs { json: false }))
        );
        assert_eq!(
            ok(&["info", "--json"]).command,
            Some(Command::Info(InfoArgs { json: true }))
        );
        assert_eq!(ok(&["mcp", "list"]).command, Some(Command::Mcp(McpCommand::List)));
        assert_eq!(
            ok(&["mcp", "remove", "x"]).command,
            Some(Command::Mcp(McpCommand::Remove { name: "x".into() }))
        );
        let Some(Command::Mcp(McpCommand::Add(add))) = ok(&[
            "mcp", "add", "-t", "stdio", "-e", "A=1", "srv", "--", "npx", "-y", "pkg",
        ])
        .command
        else {
            panic!("not mcp add");
        };
        assert_eq!(add.name, "srv");
        assert_eq!(add.target, ["npx", "-y", "pkg"]);
        assert_eq!(add.env, ["A=1"]);
        assert_eq!(add.transport, McpTransport::Stdio);
        let Some(Command::Mcp(McpCommand::Add(add))) = ok(&[
            "mcp",
            "add",
            "--transport",
            "http",
            "-H",
            "K: v",
            "--auth",
            "oauth",
            "web",
            "https://x/mcp",
        ])
        .command
        else {
            panic!("not mcp add");
        };
        assert_eq!(
            (add.transport, add.target.as_slice()),
            (McpTransport::Http, &["https://x/mcp".to_owned()][..])
        );
        assert_eq!(add.auth.as_deref(), Some("oauth"));
    }

    #[test]
    fn unknown_flags_fail_with_status_2() {
        assert_eq!(parse(&["--nope"]).unwrap_err().exit_code(), 2);
    }
}
