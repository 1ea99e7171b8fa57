//! Command hooks from `config.toml`: run through `/bin/sh -c` in the work directory with the event's
//! JSON on stdin, and read their verdict from the exit code and stdout.
//!
//! Reference (`hooks/runner.py`): exit 2 blocks with stderr (trimmed) as the reason; exit 0 whose
//! stdout is a JSON object with `hookSpecificOutput.permissionDecision == "deny"` blocks with
//! `permissionDecisionReason`; everything else — other exit codes, a timeout, a failure to start —
//! allows. Other stdout is ignored.
//!
//! Beyond the reference, the hook gets its own process group, watched by the one guard of every child
//! ([`crate::procgroup::GroupGuard`]): a timed-out or abandoned hook is killed with its whole group, and
//! so is a running one when the agent is killed (the guardian), so `sleep 30 &` inside a hook cannot
//! outlive it; a hook that finishes
//! normally may leave background work running, as in the reference. Its environment is the
//! children's (`crate::child_env`). The result says whether the hook decided, could not start, or
//! failed otherwise ([`Outcome`]), so the engine can report it and apply `on_error`.

use std::io;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::Verdict;
use crate::procgroup::GroupGuard;

/// The shell the reference's `create_subprocess_shell` uses.
const SHELL: &str = "/bin/sh";
/// At most this much of each output stream is kept; the rest is read and dropped so the hook never
/// blocks on a full pipe.
const OUTPUT_CAP: usize = 4 * 1024 * 1024;

/// How a command hook ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It ran to the end and its exit code and stdout give the verdict (the reference reads an exit
    /// other than 0 and 2 as "allow"; `failure` then says what it was, for `on_error = "block"`).
    Decided {
        verdict: Verdict,
        failure: Option<String>,
    },
    /// It never ran: the shell could not be started, or it could not find or execute the command
    /// (exit 127 or 126).
    NotStarted(String),
    /// It ran but gave no verdict: timed out, or its pipes failed.
    Failed(String),
}

/// Exit codes of a shell that could not run the command: not executable, not found.
const CANNOT_EXECUTE: i32 = 126;
const NOT_FOUND: i32 = 127;

/// Runs `command` with `stdin` as its input and returns how it ended. Every problem is logged.
pub(crate) async fn run(command: &str, stdin: &[u8], timeout: Duration, cwd: &Path) -> Outcome {
    let mut builder = Command::new(SHELL);
    crate::child_env::apply(&mut builder);
    crate::guardian::start();
    let mut child = match builder
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(error) => {
            tracing::warn!(command, %error, "hook failed to start");
            return Outcome::NotStarted(error.to_string());
        }
    };
    // Declared after `child`, so on an early return (timeout, or the caller dropping us) the group is
    // killed while the shell, its leader, is not yet reaped.
    let group = child.id().map(GroupGuard::watch);

    let finished = tokio::time::timeout(timeout, communicate(&mut child, stdin)).await;
    match finished {
        Err(_elapsed) => {
            tracing::warn!(command, timeout_s = timeout.as_secs(), "hook timed out");
            Outcome::Failed(format!("timed out after {} s", timeout.as_secs()))
        }
        Ok(Err(error)) => {
            tracing::warn!(command, %error, "hook failed");
            Outcome::Failed(error.to_string())
        }
        Ok(Ok(output)) => {
            if let Some(group) = group {
                group.disarm();
            }
            let stdout = String::from_utf8_lossy(&output.stdout);
            let stderr = String::from_utf8_lossy(&output.stderr);
            let code = output.status.code();
            if let Some(code @ (CANNOT_EXECUTE | NOT_FOUND)) = code {
                let why = stderr.trim();
                tracing::warn!(command, code, stderr = why, "hook could not run its command");
                return Outcome::NotStarted(format!("exit {code}: {why}"));
            }
            let failure = match code {
                Some(0 | 2) => None,
                Some(other) => Some(format!("exited with {other}")),
                None => Some("killed by a signal".to_owned()),
            };
            Outcome::Decided {
                verdict: verdict(code, &stdout, &stderr),
                failure,
            }
        }
    }
}

/// `command` with a relative program path (`./check.sh`, `hooks/check.sh`) made absolute against
/// `config_dir`, the directory of the configuration file that names the hook, so a hook never runs a
/// program the work dir provides. A bare name (`python3`) is left to `PATH`, an absolute path as it is;
/// leading `NAME=value` assignments are skipped; arguments are not rewritten. Without a directory
/// (inline `--config`), a relative program cannot be resolved: the error says why.
pub(crate) fn resolve_command(command: &str, config_dir: Option<&Path>) -> Result<String, String> {
    let mut start = 0;
    let mut word;
    loop {
        let rest = &command[start..];
        let skipped = rest.len() - rest.trim_start().len();
        start += skipped;
        let rest = &command[start..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        word = &rest[..end];
        if is_assignment(word) {
            start += end;
            continue;
        }
        break;
    }
    let relative = word.contains('/') && !word.starts_with(['/', '~', '"', '\'', '$', '`']);
    if !relative {
        return Ok(command.to_owned());
    }
    let Some(dir) = config_dir else {
        return Err(format!(
            "`{word}` is a relative path and the configuration came from no file to resolve it against"
        ));
    };
    // `components` drops the `.` of `./check.sh`.
    let absolute: std::path::PathBuf = dir.join(word).components().collect();
    let quoted = format!("'{}'", absolute.to_string_lossy().replace('\'', r"'\''"));
    Ok(format!(
        "{}{quoted}{}",
        &command[..start],
        &command[start + word.len()..]
    ))
}

/// Whether `word` is a shell variable assignment (`NAME=value`).
fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What a finished hook left behind.
struct Output {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Feeds stdin, drains both outputs to their end, then reaps the shell (Python's `communicate`).
async fn communicate(child: &mut tokio::process::Child, input: &[u8]) -> io::Result<Output> {
    let stdin = child.stdin.take();
    let write = async move {
        if let Some(mut pipe) = stdin {
            // A hook that exits without reading its input closes the pipe: not an error.
            let _ = pipe.write_all(input).await;
            // Dropping the pipe sends EOF.
        }
    };
    let (_, stdout, stderr) = tokio::join!(
        write,
        read_capped(child.stdout.take()),
        read_capped(child.stderr.take())
    );
    let status = child.wait().await?;
    Ok(Output {
        status,
        stdout: stdout?,
        stderr: stderr?,
    })
}

async fn read_capped<R: AsyncRead + Unpin>(pipe: Option<R>) -> io::Result<Vec<u8>> {
    let mut kept = Vec::new();
    let Some(mut pipe) = pipe else {
        return Ok(kept);
    };
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let n = pipe.read(&mut chunk).await?;
        if n == 0 {
            return Ok(kept);
        }
        let room = OUTPUT_CAP.saturating_sub(kept.len());
        kept.extend_from_slice(&chunk[..n.min(room)]);
    }
}

/// The verdict of a hook that ran to completion. `code` is `None` when a signal ended it.
pub(crate) fn verdict(code: Option<i32>, stdout: &str, stderr: &str) -> Verdict {
    match code {
        Some(2) => Verdict::Block(stderr.trim().to_owned()),
        Some(0) if !stdout.trim().is_empty() => structured_verdict(stdout),
        _ => Verdict::Allow,
    }
}

/// Exit 0 with JSON on stdout. Reference quirk not copied: when `hookSpecificOutput` is present but
/// not an object, Python raises and the whole trigger fails open (dropping other hooks' blocks and
/// the `HookResolved` event); here only this hook allows.
fn structured_verdict(stdout: &str) -> Verdict {
    let Ok(Value::Object(parsed)) = serde_json::from_str::<Value>(stdout) else {
        return Verdict::Allow;
    };
    let Some(Value::Object(output)) = parsed.get("hookSpecificOutput") else {
        return Verdict::Allow;
    };
    if output.get("permissionDecision").and_then(Value::as_str) != Some("deny") {
        return Verdict::Allow;
    }
    // Reference: `str(output.get("permissionDecisionReason", ""))`.
    let reason = match output.get("permissionDecisionReason") {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) => "None".to_owned(),
        Some(Value::Bool(true)) => "True".to_owned(),
        Some(Value::Bool(false)) => "False".to_owned(),
        Some(other) => other.to_string(),
    };
    Verdict::Block(reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::time::Instant;

    const LONG: Duration = Duration::from_secs(20);

    async fn sh(command: &str) -> Verdict {
        let dir = tempfile::tempdir().unwrap();
        match run(command, b"{}", LONG, dir.path()).await {
            Outcome::Decided { verdict, .. } => verdict,
            other => panic!("{command}: {other:?}"),
        }
    }

    #[test]
    fn relative_programs_resolve_against_the_config_dir() {
        let dir = Path::new("/etc/kimi");
        for (command, expected) in [
            ("./check.sh", "'/etc/kimi/check.sh'"),
            (
                "  hooks/check.sh --strict",
                "  '/etc/kimi/hooks/check.sh' --strict",
            ),
            ("A=1 B=2 ./x y", "A=1 B=2 '/etc/kimi/x' y"),
            ("python3 check.py", "python3 check.py"),
            ("/usr/bin/check", "/usr/bin/check"),
            ("~/bin/check", "~/bin/check"),
            ("echo hi; exit 2", "echo hi; exit 2"),
        ] {
            assert_eq!(
                resolve_command(command, Some(dir)).as_deref(),
                Ok(expected),
                "{command}"
            );
        }
        assert_eq!(
            resolve_command("./it's.sh", Some(Path::new("/d"))).as_deref(),
            Ok(r"'/d/it'\''s.sh'")
        );
        assert!(resolve_command("./check.sh", None).is_err());
        assert_eq!(resolve_command("true", None).as_deref(), Ok("true"));
    }

    #[tokio::test]
    async fn a_command_that_cannot_run_is_not_started() {
        let dir = tempfile::tempdir().unwrap();
        let outcome = run("./missing.sh", b"{}", LONG, dir.path()).await;
        assert!(
            matches!(&outcome, Outcome::NotStarted(why) if why.starts_with("exit 127")),
            "{outcome:?}"
        );
        let outcome = run("exit 1", b"{}", LONG, dir.path()).await;
        assert_eq!(
            outcome,
            Outcome::Decided {
                verdict: Verdict::Allow,
                failure: Some("exited with 1".into())
            }
        );
    }

    #[test]
    fn exit_codes_and_stdout_decide() {
        assert_eq!(
            verdict(Some(2), "", "  no way \n"),
            Verdict::Block("no way".into())
        );
        assert_eq!(verdict(Some(2), "ignored", ""), Verdict::Block(String::new()));
        assert_eq!(verdict(Some(1), "", "err"), Verdict::Allow);
        assert_eq!(verdict(None, "", ""), Verdict::Allow);
        assert_eq!(verdict(Some(0), "plain text", ""), Verdict::Allow);
        assert_eq!(verdict(Some(0), "[1]", ""), Verdict::Allow);
        let deny =
            r#" {"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "nope"}} "#;
        assert_eq!(verdict(Some(0), deny, ""), Verdict::Block("nope".into()));
        assert_eq!(
            verdict(Some(1), deny, ""),
            Verdict::Allow,
            "JSON counts only on exit 0"
        );
        let no_reason = r#"{"hookSpecificOutput": {"permissionDecision": "deny"}}"#;
        assert_eq!(verdict(Some(0), no_reason, ""), Verdict::Block(String::new()));
        let number =
            r#"{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": 7}}"#;
        assert_eq!(verdict(Some(0), number, ""), Verdict::Block("7".into()));
        let allow = r#"{"hookSpecificOutput": {"permissionDecision": "allow"}}"#;
        assert_eq!(verdict(Some(0), allow, ""), Verdict::Allow);
        let odd = r#"{"hookSpecificOutput": "deny"}"#;
        assert_eq!(verdict(Some(0), odd, ""), Verdict::Allow);
    }

    #[tokio::test]
    async fn exit_2_blocks_with_trimmed_stderr() {
        assert_eq!(
            sh("echo 'Shell blocked by hook' >&2; exit 2").await,
            Verdict::Block("Shell blocked by hook".into())
        );
    }

    #[tokio::test]
    async fn deny_json_on_exit_0_blocks() {
        let command = r#"echo '{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "not here"}}'"#;
        assert_eq!(sh(command).await, Verdict::Block("not here".into()));
    }

    #[tokio::test]
    async fn other_outcomes_allow() {
        assert_eq!(sh("echo ok").await, Verdict::Allow);
        assert_eq!(sh("echo oops >&2; exit 1").await, Verdict::Allow);
        assert_eq!(sh("kill -9 $$").await, Verdict::Allow);
    }

    #[tokio::test]
    async fn a_missing_work_dir_is_a_start_failure() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("missing");
        assert!(matches!(
            run("exit 2", b"{}", LONG, &gone).await,
            Outcome::NotStarted(_)
        ));
    }

    #[tokio::test]
    async fn the_hook_reads_its_input_in_the_work_dir() {
        let dir = tempfile::tempdir().unwrap();
        let outcome = run(
            r#"cat > input.json; pwd > cwd.txt"#,
            br#"{"a": 1}"#,
            LONG,
            dir.path(),
        )
        .await;
        assert!(matches!(
            outcome,
            Outcome::Decided {
                verdict: Verdict::Allow,
                failure: None
            }
        ));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("input.json")).unwrap(),
            r#"{"a": 1}"#
        );
        let cwd = std::fs::read_to_string(dir.path().join("cwd.txt")).unwrap();
        assert_eq!(
            std::fs::canonicalize(cwd.trim()).unwrap(),
            std::fs::canonicalize(dir.path()).unwrap()
        );
    }

    #[tokio::test]
    async fn a_hook_that_ignores_a_large_input_still_decides() {
        let dir = tempfile::tempdir().unwrap();
        let input = vec![b' '; 1024 * 1024];
        let outcome = run("echo big >&2; exit 2", &input, LONG, dir.path()).await;
        assert!(matches!(outcome, Outcome::Decided { verdict: Verdict::Block(r), .. } if r == "big"));
    }

    #[tokio::test]
    async fn a_timed_out_hook_allows_and_its_group_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let command = format!("sleep 30 & echo $! > '{}'; wait; exit 2", pid_file.display());
        // A deadline on the awaited outcome: the 1 s timeout ends the hook, not the 30 s sleeper.
        let outcome = tokio::time::timeout(
            Duration::from_secs(5),
            run(&command, b"{}", Duration::from_secs(1), dir.path()),
        )
        .await
        .expect("the hook's timeout ended it");
        assert_eq!(outcome, Outcome::Failed("timed out after 1 s".into()));

        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let stat = format!("/proc/{}/stat", pid.trim());
        // SIGKILL is asynchronous: wait (bounded) until the background `sleep` is gone or a zombie.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let alive = std::fs::read_to_string(&stat)
                .map(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
                .unwrap_or(false);
            if !alive {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the hook's background process survived"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
