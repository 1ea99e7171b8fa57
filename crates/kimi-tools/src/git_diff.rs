//! `git_diff` (seeds/003): what changed in the work dir's git repository, as `git diff` prints it.
//! Read-only and never asked for, in both agents.
//!
//! The forms: `{}` the working tree against the index, `file` one path, `ref` against a commit or
//! branch, `cached` the staged changes, and `file` with `ref`.
//!
//! Read-only for real: a repository is untrusted, and its configuration can make `git diff` run
//! programs (external diff drivers, textconv, clean filters, an fsmonitor hook) or write (index
//! refresh, lazy fetches). So git runs with those switched off (`--no-ext-diff`, `--no-textconv`, the
//! filters the repository's own configuration defines emptied, `core.fsmonitor=false`, no optional
//! locks, no protocols, submodules not entered), with stdin closed, a time limit and a cap on what is
//! read. A ref that looks like an option is refused. Long diffs go through the toolset's output budget like any output: the model
//! sees head and tail and can read the rest from the saved file.
//!
//! git is a process the model asked for, so it runs confined by the session's sandbox as Shell
//! commands are (docs/sandbox.md), and not at all when the sandbox cannot be enforced.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kimi_core::CommandSandbox;
use kimi_core::Environment;
use kimi_core::{CallContext, Plan, Tool, parse_args};
use kimi_llm::ToolSpec;
use kimi_wire::message::ToolReturnValue;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

use crate::output::{DEFAULT_MAX_LINE_LENGTH, OutputBuilder};
use crate::shell::MAX_CAPTURED_CHARS;

/// The tool's name (seeds/003 spells it in snake case).
pub const NAME: &str = "git_diff";

/// How long git may take.
const TIMEOUT: Duration = Duration::from_secs(60);
/// Bytes of diff read at most; what is beyond is dropped with a note (the budget keeps far less).
const MAX_READ_BYTES: u64 = 4 * MAX_CAPTURED_CHARS as u64;
/// Bytes of git's error output kept.
const MAX_STDERR_BYTES: u64 = 16 * 1024;

// Parameters of `git_diff` (field doc comments are the parameter descriptions).
#[derive(Debug, Deserialize, JsonSchema)]
struct GitDiffArgs {
    /// Only this file or directory (relative to the working directory).
    #[serde(default)]
    file: Option<String>,
    /// Compare against this commit, branch or tag (for example `main` or `HEAD~3`) instead of the index.
    #[serde(default, rename = "ref")]
    reference: Option<String>,
    /// Show the staged changes (`git diff --cached`).
    #[serde(default)]
    cached: bool,
}

/// The `git_diff` tool.
#[derive(Debug)]
pub struct GitDiff {
    spec: ToolSpec,
    env: Arc<Environment>,
}

impl GitDiff {
    /// The tool, diffing the repository that holds `env.work_dir`, with git confined by `env`'s
    /// sandbox.
    pub fn new(env: Arc<Environment>) -> Self {
        Self {
            spec: crate::tool_spec::<GitDiffArgs>(NAME, include_str!("descriptions/git_diff.md")),
            env,
        }
    }
}

impl Tool for GitDiff {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            let args: GitDiffArgs = parse_args(args)?;
            let reference = args.reference.as_deref().filter(|r| !r.is_empty());
            if let Some(reference) = reference
                && (reference.starts_with('-') || reference.chars().any(char::is_control))
            {
                return Err(ToolReturnValue::error(
                    "",
                    format!("`{reference}` is not a commit, branch or tag name."),
                    "Invalid ref",
                ));
            }
            let request = Request {
                file: args.file.filter(|f| !f.is_empty()),
                reference: reference.map(str::to_owned),
                cached: args.cached,
            };
            let sandbox = crate::shell::command_sandbox(&self.env)?;
            Ok(Plan::read_only(Box::pin(async move {
                let git = Git {
                    work_dir: &self.env.work_dir,
                    sandbox: &sandbox,
                    cancel: &ctx.cancel,
                };
                diff(&git, &request).await
            })))
        })
    }
}

/// One diff to show.
#[derive(Debug)]
struct Request {
    file: Option<String>,
    reference: Option<String>,
    cached: bool,
}

impl Request {
    /// `git diff`'s arguments after the options that keep it read-only.
    fn args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if self.cached {
            args.push("--cached".to_owned());
        }
        args.extend(self.reference.clone());
        args.push("--".to_owned());
        args.extend(self.file.clone());
        args
    }

    /// What was compared, for the message.
    fn what(&self) -> String {
        let mut what = match (&self.reference, self.cached) {
            (Some(reference), true) => format!("staged changes against `{reference}`"),
            (Some(reference), false) => format!("working tree against `{reference}`"),
            (None, true) => "staged changes".to_owned(),
            (None, false) => "unstaged changes in the working tree".to_owned(),
        };
        if let Some(file) = &self.file {
            what.push_str(&format!(" in `{file}`"));
        }
        what
    }
}

/// How a git run ended.
struct Ran {
    success: bool,
    stdout: Vec<u8>,
    stderr: String,
    /// More output was there than was read.
    cut: bool,
}

/// Where and how git runs for one call.
struct Git<'a> {
    work_dir: &'a Path,
    sandbox: &'a CommandSandbox,
    cancel: &'a CancellationToken,
}

async fn diff(git_at: &Git<'_>, request: &Request) -> ToolReturnValue {
    let work_dir = git_at.work_dir;
    let inside = match git(git_at, &[], &["rev-parse", "--is-inside-work-tree"]).await {
        Ok(ran) => ran.success && String::from_utf8_lossy(&ran.stdout).trim() == "true",
        Err(failure) => return failure,
    };
    if !inside {
        return ToolReturnValue::error(
            "",
            format!(
                "`{}` is not inside a git work tree, so there is no diff to show. git_diff works only in \
                 a git repository.",
                work_dir.display()
            ),
            "Not a git repository",
        );
    }
    let overrides = match filter_overrides(git_at).await {
        Ok(overrides) => overrides,
        Err(failure) => return failure,
    };
    let mut args: Vec<String> = [
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--ignore-submodules=dirty",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    args.extend(request.args());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
    let ran = match git(git_at, &overrides, &args).await {
        Ok(ran) => ran,
        Err(failure) => return failure,
    };
    if !ran.success {
        let detail = ran.stderr.trim();
        return ToolReturnValue::error("", format!("git diff failed: {detail}"), "git diff failed");
    }
    let mut out = OutputBuilder::with_limits(usize::MAX, Some(DEFAULT_MAX_LINE_LENGTH));
    out.write(&String::from_utf8_lossy(&ran.stdout));
    if out.n_chars() == 0 {
        return out.ok(&format!("No differences: {}.", request.what()), "No differences");
    }
    let mut message = format!("Diff of the {}.", request.what());
    if ran.cut {
        message.push_str(&format!(
            " The diff is longer than {MAX_READ_BYTES} bytes and was cut there; narrow it with `file`."
        ));
    }
    out.ok(&message, "")
}

/// `-c filter.<name>.clean= ...` for every filter driver the repository's own configuration defines
/// (its `local` and `worktree` scopes, with what they include), so none of its programs runs while git
/// compares work-tree files. The user's own (global, system) filters, such as Git LFS, keep working.
async fn filter_overrides(git_at: &Git<'_>) -> Result<Vec<String>, ToolReturnValue> {
    let ran = git(
        git_at,
        &[],
        &[
            "config",
            "--show-scope",
            "--name-only",
            "--get-regexp",
            r"^filter\.",
        ],
    )
    .await?;
    let listed = String::from_utf8_lossy(&ran.stdout).into_owned();
    let mut drivers: Vec<&str> = listed
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .filter(|(scope, _)| matches!(*scope, "local" | "worktree"))
        .filter_map(|(_, key)| key.strip_prefix("filter."))
        .filter_map(|rest| rest.rsplit_once('.').map(|(name, _)| name))
        .collect();
    drivers.sort_unstable();
    drivers.dedup();
    Ok(drivers
        .into_iter()
        .flat_map(|name| {
            ["clean=", "smudge=", "process=", "required=false"]
                .map(|setting| format!("filter.{name}.{setting}"))
        })
        .flat_map(|setting| ["-c".to_owned(), setting])
        .collect())
}

/// Runs `git <config> <args>` in the work dir, confined by the sandbox, with everything that could
/// change something or run a program switched off.
async fn git(at: &Git<'_>, config: &[&str], args: &[&str]) -> Result<Ran, ToolReturnValue> {
    let mut command = tokio::process::Command::new("git");
    // The children's environment (secrets left out), before git's own variables.
    kimi_core::child_env::apply(&mut command);
    command
        .args(["-c", "core.fsmonitor=false", "-c", "protocol.allow=never"])
        .args(config)
        .args(args)
        .current_dir(at.work_dir)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_NO_LAZY_FETCH", "1")
        .env("GIT_PAGER", "cat")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // A confined git gets a session (so a group) of its own from the sandbox.
    let confined = at.sandbox.confine(command.as_std_mut()).map_err(|e| {
        ToolReturnValue::error(
            "",
            format!("Cannot run git in the sandbox: {e}"),
            "Execution failed",
        )
    })?;
    if !confined {
        command.process_group(0);
    }
    let mut child = command.spawn().map_err(|e| {
        ToolReturnValue::error(
            "",
            format!("Cannot run git: {e}. git_diff needs git installed and on PATH."),
            "git not found",
        )
    })?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(ToolReturnValue::error(
            "",
            "Cannot read git's output.",
            "git failed",
        ));
    };
    let run = async {
        let read_err = async {
            let mut err = Vec::new();
            stderr
                .take(MAX_STDERR_BYTES)
                .read_to_end(&mut err)
                .await
                .map(|_| err)
        };
        let read_out = async {
            let mut out = Vec::new();
            let mut limited = stdout.take(MAX_READ_BYTES);
            limited.read_to_end(&mut out).await?;
            // Anything left means the diff is cut here: git is stopped rather than read to the end.
            let mut probe = [0u8; 1];
            let cut = limited.into_inner().read(&mut probe).await? > 0;
            if cut {
                let _ = child.start_kill();
            }
            Ok::<_, std::io::Error>((out, cut))
        };
        let (read_out, read_err) = tokio::join!(read_out, read_err);
        let ((stdout, cut), stderr) = (read_out?, read_err?);
        let status = child.wait().await?;
        Ok::<_, std::io::Error>(Ran {
            success: cut || status.success(),
            stdout,
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            cut,
        })
    };
    tokio::select! {
        ran = tokio::time::timeout(TIMEOUT, run) => match ran {
            Ok(Ok(ran)) => Ok(ran),
            Ok(Err(e)) => Err(ToolReturnValue::error("", format!("Cannot read git's output: {e}"), "git failed")),
            Err(_) => Err(ToolReturnValue::error(
                "",
                format!("git diff did not finish within {}s.", TIMEOUT.as_secs()),
                "Timed out",
            )),
        },
        () = at.cancel.cancelled() => Err(ToolReturnValue::error("", "git diff was cancelled.", "Cancelled")),
    }
}
