//! `Bash` (seeds/002): the Shell implementation under seeds/002's arguments and limits. `timeout` is in
//! milliseconds: in the foreground 60 000 by default and at most 300 000; in the background 600 000 by
//! default and at most 600 000, or no limit with `disable_timeout`. `cwd` picks the directory;
//! `description` is required with `run_in_background`. The command itself runs exactly as Shell's
//! (stdin closed, its own process group, SIGTERM then SIGKILL after 5 s), with the same approval.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kimi_core::{CallContext, Plan, Tool, parse_args};
use kimi_llm::ToolSpec;
use kimi_wire::message::ToolReturnValue;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::args;
use crate::shell::{RunMode, Shell, ShellRun};

/// The tool's name.
pub(crate) const NAME: &str = "Bash";

/// Foreground default and limit, and background default and limit, in milliseconds (seeds/002).
const FOREGROUND_DEFAULT_MS: i64 = 60_000;
const FOREGROUND_MAX_MS: i64 = 5 * 60_000;
const BACKGROUND_DEFAULT_MS: i64 = 10 * 60_000;
const BACKGROUND_MAX_MS: i64 = 10 * 60_000;

// Parameters of `Bash` (field doc comments are the parameter descriptions).
#[derive(Debug, Deserialize, JsonSchema)]
struct BashArgs {
    /// The command to run.
    command: String,
    /// The directory to run it in (relative paths start at the working directory); the working directory when left out.
    #[serde(default)]
    cwd: Option<String>,
    /// Milliseconds the command may run: in the foreground 60000 by default and at most 300000; in the background 600000 by default and at most 600000.
    #[serde(default)]
    #[schemars(schema_with = "super::optional_integer")]
    timeout: Option<i64>,
    /// A few words on what the command does; required when `run_in_background` is true.
    #[serde(default)]
    description: Option<String>,
    /// Run the command as a background task: the call returns its task id at once.
    #[serde(default)]
    run_in_background: bool,
    /// With `run_in_background`: let the task run without a time limit.
    #[serde(default)]
    disable_timeout: bool,
}

/// The `Bash` tool.
#[derive(Debug)]
pub(crate) struct Bash {
    spec: ToolSpec,
    shell: Arc<Shell>,
    work_dir: PathBuf,
}

impl Bash {
    /// `Bash` over `shell`, resolving `cwd` against `work_dir`.
    pub(crate) fn new(shell: Arc<Shell>, work_dir: PathBuf) -> Self {
        Self {
            spec: crate::tool_spec::<BashArgs>(NAME, include_str!("descriptions/bash.md")),
            shell,
            work_dir,
        }
    }

    fn make_plan(&self, args: Value, ctx: CallContext) -> Result<Plan, ToolReturnValue> {
        let args: BashArgs = parse_args(args)?;
        let mode = mode(&args)?;
        let cwd = match args.cwd.as_deref().filter(|c| !c.is_empty()) {
            Some(cwd) => Some(directory(&self.work_dir, cwd)?),
            None => None,
        };
        let run = ShellRun {
            command: args.command,
            cwd,
            mode,
        };
        Arc::clone(&self.shell).plan_run(run, ctx)
    }
}

impl Tool for Bash {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move { self.make_plan(args, ctx) })
    }
}

/// seeds/002's limits, checked in the order a model would fix them.
fn mode(args: &BashArgs) -> Result<RunMode, ToolReturnValue> {
    if let Some(timeout) = args.timeout
        && timeout < 1
    {
        return Err(args::below_minimum("timeout", 1));
    }
    if !args.run_in_background {
        if args.disable_timeout {
            return Err(args::value_error(
                "disable_timeout only applies to background commands; set run_in_background=true as well",
            ));
        }
        let timeout = args.timeout.unwrap_or(FOREGROUND_DEFAULT_MS);
        if timeout > FOREGROUND_MAX_MS {
            return Err(args::value_error(&format!(
                "timeout must be <= {FOREGROUND_MAX_MS} ms (5 minutes) for foreground commands; use \
                 run_in_background=true for longer commands (up to {BACKGROUND_MAX_MS} ms, or no limit with \
                 disable_timeout=true)"
            )));
        }
        return Ok(RunMode::Foreground {
            timeout: millis(timeout),
        });
    }
    let description = args.description.as_deref().unwrap_or("").trim();
    if description.is_empty() {
        return Err(args::value_error(
            "description is required when run_in_background is true",
        ));
    }
    let timeout = if args.disable_timeout {
        None
    } else {
        let timeout = args.timeout.unwrap_or(BACKGROUND_DEFAULT_MS);
        if timeout > BACKGROUND_MAX_MS {
            return Err(args::value_error(&format!(
                "timeout must be <= {BACKGROUND_MAX_MS} ms (10 minutes) for background commands; set \
                 disable_timeout=true for a command that must run longer"
            )));
        }
        Some(millis(timeout))
    };
    Ok(RunMode::Background {
        description: description.to_owned(),
        timeout,
    })
}

fn millis(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(1))
}

/// `cwd` as a directory to run in: relative to the work dir, `~` expanded; it must exist.
fn directory(work_dir: &Path, cwd: &str) -> Result<PathBuf, ToolReturnValue> {
    let path = crate::file::expand_user(cwd);
    let path = if path.is_absolute() {
        path
    } else {
        work_dir.join(path)
    };
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_dir() => Ok(path),
        Ok(_) => Err(ToolReturnValue::error(
            "",
            format!("`{cwd}` is not a directory."),
            "Invalid cwd",
        )),
        Err(_) => Err(ToolReturnValue::error(
            "",
            format!("`{cwd}` does not exist."),
            "Invalid cwd",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn mode_of(args: Value) -> Result<RunMode, String> {
        let args: BashArgs = serde_json::from_value(args).unwrap();
        mode(&args).map_err(|e| e.message)
    }

    fn foreground(ms: u64) -> String {
        format!(
            "{:?}",
            RunMode::Foreground {
                timeout: Duration::from_millis(ms)
            }
        )
    }

    #[test]
    fn seeds_limits_in_milliseconds() {
        let show = |r: Result<RunMode, String>| r.map(|m| format!("{m:?}"));
        assert_eq!(show(mode_of(json!({"command": "x"}))), Ok(foreground(60_000)));
        assert_eq!(
            show(mode_of(json!({"command": "x", "timeout": 1500}))),
            Ok(foreground(1500))
        );
        assert_eq!(
            show(mode_of(json!({"command": "x", "timeout": 300_000}))),
            Ok(foreground(300_000))
        );
        assert!(mode_of(json!({"command": "x", "timeout": 300_001})).is_err());
        assert!(mode_of(json!({"command": "x", "timeout": 0})).is_err());
        assert!(mode_of(json!({"command": "x", "disable_timeout": true})).is_err());
        let background = |timeout: Option<u64>| {
            format!(
                "{:?}",
                RunMode::Background {
                    description: "d".into(),
                    timeout: timeout.map(Duration::from_millis)
                }
            )
        };
        let bg = json!({"command": "x", "run_in_background": true, "description": " d "});
        assert_eq!(show(mode_of(bg.clone())), Ok(background(Some(600_000))));
        let mut capped = bg;
        capped["timeout"] = json!(600_000);
        assert_eq!(show(mode_of(capped.clone())), Ok(background(Some(600_000))));
        capped["timeout"] = json!(600_001);
        assert!(mode_of(capped.clone()).is_err());
        // disable_timeout wins over a timeout, as seeds/002 documents it.
        capped["disable_timeout"] = json!(true);
        assert_eq!(show(mode_of(capped)), Ok(background(None)));
        assert_eq!(
            mode_of(json!({"command": "x", "run_in_background": true})).unwrap_err(),
            "Error validating JSON arguments: 1 validation error for Params\n  Value error, description is \
             required when run_in_background is true"
        );
    }

    #[test]
    fn cwd_must_be_an_existing_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("file"), "").unwrap();
        assert_eq!(directory(dir.path(), "sub").unwrap(), dir.path().join("sub"));
        assert_eq!(directory(dir.path(), "/").unwrap(), PathBuf::from("/"));
        assert_eq!(
            directory(dir.path(), "file").unwrap_err().message,
            "`file` is not a directory."
        );
        assert_eq!(
            directory(dir.path(), "gone").unwrap_err().message,
            "`gone` does not exist."
        );
    }
}
