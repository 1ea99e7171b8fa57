//! Running a bash task: the command detached from any turn, in its own process group, with stdin closed
//! and stdout and stderr appended to the task's `output.log` directly, so its output keeps being logged
//! even if the agent exits first (`keep_alive_on_exit`). The agent supervises it from a tokio task
//! instead of the reference's separate worker process.

use std::io;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Child;
use tokio_util::sync::CancellationToken;

use crate::procgroup;
use crate::sandbox::CommandSandbox;

/// How long the exit status of a stopped command is awaited after SIGKILL.
const REAP_AFTER_KILL: Duration = Duration::from_secs(2);

/// What to run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BashCommand<'a> {
    /// The shell binary.
    pub shell: &'a Path,
    /// Passed to `-c`.
    pub command: &'a str,
    /// The working directory.
    pub cwd: &'a Path,
    /// Where stdout and stderr go (appended).
    pub output: &'a Path,
    /// How the command is confined.
    pub sandbox: &'a CommandSandbox,
}

/// How a supervised command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BashEnd {
    /// It exited by itself (minus the signal number if a signal ended it).
    Exited(i32),
    /// Its timeout passed; the group was stopped. The exit code, when it could be collected.
    TimedOut(Option<i32>),
    /// A stop was requested; the group was stopped.
    Stopped(Option<i32>),
    /// The agent is exiting and leaves the command running (`keep_alive_on_exit`).
    Detached,
}

/// Starts the command; the child is not killed when dropped (a kept-alive task outlives us).
pub(crate) fn spawn(cmd: BashCommand<'_>) -> io::Result<Child> {
    let log = crate::private_files::open_append(cmd.output)?;
    // A confined command may still reopen its own log (`> /dev/stderr` goes through the path).
    let sandbox = cmd.sandbox.clone().with_writable_file(cmd.output.to_path_buf());
    procgroup::shell_command(cmd.shell, cmd.command, cmd.cwd, &sandbox)?
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log))
        .spawn()
}

/// Waits for `child` (leader of group `pgid`) to exit, its timeout to pass, `stop` to fire or `detach`
/// to fire; a timeout or a stop stops the whole group (SIGTERM, `grace`, SIGKILL), a detach leaves it
/// running.
pub(crate) async fn supervise(
    mut child: Child,
    pgid: i32,
    timeout: Option<Duration>,
    grace: Duration,
    stop: &CancellationToken,
    detach: &CancellationToken,
) -> BashEnd {
    let deadline = async {
        match timeout {
            Some(timeout) => tokio::time::sleep(timeout).await,
            None => std::future::pending().await,
        }
    };
    let timed_out = tokio::select! {
        status = child.wait() => return BashEnd::Exited(status.map_or(-1, procgroup::exit_code)),
        () = deadline => true,
        () = stop.cancelled() => false,
        () = detach.cancelled() => return BashEnd::Detached,
    };
    let code = stop_group(&mut child, pgid, grace).await;
    if timed_out {
        BashEnd::TimedOut(code)
    } else {
        BashEnd::Stopped(code)
    }
}

/// Stops the group and collects the leader's exit code if it comes in time.
async fn stop_group(child: &mut Child, pgid: i32, grace: Duration) -> Option<i32> {
    let mut reaped = None;
    procgroup::terminate(pgid, grace, || {
        if reaped.is_none()
            && let Ok(Some(status)) = child.try_wait()
        {
            reaped = Some(procgroup::exit_code(status));
        }
    })
    .await;
    if reaped.is_some() {
        return reaped;
    }
    match tokio::time::timeout(REAP_AFTER_KILL, child.wait()).await {
        Ok(Ok(status)) => Some(procgroup::exit_code(status)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn run(command: &str, dir: &Path) -> (Child, i32) {
        let child = spawn(BashCommand {
            shell: Path::new("bash"),
            command,
            cwd: dir,
            output: &dir.join("output.log"),
            sandbox: &CommandSandbox::unconfined(),
        })
        .unwrap();
        let pgid = i32::try_from(child.id().unwrap()).unwrap();
        (child, pgid)
    }

    fn never() -> CancellationToken {
        CancellationToken::new()
    }

    /// SIGKILL lands asynchronously and orphans are reaped by init: give the group a moment to vanish.
    async fn gone_soon(pgid: i32) -> bool {
        for _ in 0..200 {
            if !procgroup::is_alive(pgid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    #[tokio::test]
    async fn output_goes_to_the_log_in_write_order() {
        let dir = tempfile::tempdir().unwrap();
        let (child, pgid) = run("echo one; echo two >&2; pwd; exit 3", dir.path());
        let end = supervise(child, pgid, None, Duration::from_secs(1), &never(), &never()).await;
        assert_eq!(end, BashEnd::Exited(3));
        let log = std::fs::read_to_string(dir.path().join("output.log")).unwrap();
        assert_eq!(log, format!("one\ntwo\n{}\n", dir.path().display()));
    }

    #[tokio::test]
    async fn timeout_and_stop_end_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let (child, pgid) = run("trap '' TERM; sleep 30 & wait", dir.path());
        let end = supervise(
            child,
            pgid,
            Some(Duration::from_millis(300)),
            Duration::from_millis(200),
            &never(),
            &never(),
        )
        .await;
        // bash ignores SIGTERM, its sleep does not: bash may exit by itself before the SIGKILL.
        assert!(matches!(end, BashEnd::TimedOut(Some(_))), "{end:?}");
        assert!(gone_soon(pgid).await);

        let (child, pgid) = run("sleep 30", dir.path());
        let stop = CancellationToken::new();
        stop.cancel();
        let end = supervise(child, pgid, None, Duration::from_secs(2), &stop, &never()).await;
        assert_eq!(end, BashEnd::Stopped(Some(-15)));
        assert!(gone_soon(pgid).await);

        let (child, pgid) = run("sleep 30", dir.path());
        let detach = CancellationToken::new();
        detach.cancel();
        let end = supervise(child, pgid, None, Duration::from_secs(2), &never(), &detach).await;
        assert_eq!(end, BashEnd::Detached);
        assert!(procgroup::is_alive(pgid));
        procgroup::signal(pgid, nix::sys::signal::Signal::SIGKILL);
    }
}
