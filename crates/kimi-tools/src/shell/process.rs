//! Running one shell command to completion, a deadline or a cancel, and making sure nothing it started
//! outlives a kill.
//!
//! The command runs as `<shell> -c <command>` in its own process group, with stdin closed (an
//! interactive prompt reads EOF instead of waiting forever) and stdout and stderr both writing into
//! *one* pipe. The reference reads two pipes and merges them line by line, which can reorder lines that
//! were written close together; a shared pipe gives the order in which the command wrote them, as a
//! terminal would show it.
//!
//! Stopping (deadline or cancel) signals the whole group: SIGTERM, up to a grace period for it to go
//! away, then SIGKILL, so grandchildren that ignore SIGTERM die too. After the kill the pipe is drained
//! only briefly: a process that left the group (`setsid`) and still holds the pipe cannot keep us
//! waiting. If the run future is dropped instead (the turn was abandoned), a guard sends SIGKILL to the
//! group at once. While the command runs, its group is registered with the process guardian
//! (`kimi_core::guardian`), which kills it if the agent is killed before it can do so itself.
//!
//! A confined command is started by the sandbox's spawner (`kimi_core::spawner`), which reaps
//! it and reports its status; it is stopped through its group exactly the same way.
//!
//! When the command ends on its own, processes it left running in the background are not touched,
//! as in the reference.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Duration;

use kimi_core::CommandSandbox;
use kimi_core::{procgroup, procgroup::GroupChild, procgroup::GroupGuard};
use nix::sys::signal::Signal;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long a stopped command's process group gets between SIGTERM and SIGKILL.
pub(crate) const KILL_GRACE: Duration = Duration::from_secs(5);

/// How long the pipe (and the exit status) may still be collected after SIGKILL.
const DRAIN_AFTER_KILL: Duration = Duration::from_millis(500);

/// How often the group is checked for survivors during the grace period.
const GRACE_POLL: Duration = Duration::from_millis(50);

/// Bytes read from the pipe at a time.
const READ_CHUNK: usize = 64 * 1024;

/// A line longer than this is passed on in pieces, so a command that never prints a newline cannot
/// make us buffer without bound. It is far more than the output budget keeps of one line.
const MAX_PENDING_LINE: usize = 256 * 1024;

/// When to give up on a command.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// From the start of the command to the end of its output and its exit.
    pub timeout: Duration,
    /// Between SIGTERM and SIGKILL when stopping it.
    pub grace: Duration,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It exited by itself: the exit code, or minus the signal number if a signal killed it (as Python's
    /// `returncode` reports it).
    Exited(i32),
    /// The deadline passed; the group was killed.
    TimedOut,
    /// The cancel token fired; the group was killed.
    Cancelled,
}

/// What the command should run with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ShellCommand<'a> {
    /// The shell binary (`bash`, or `sh` where there is none).
    pub shell: &'a Path,
    /// Passed to `-c` as is.
    pub command: &'a str,
    /// The working directory.
    pub cwd: &'a Path,
    /// How the command is confined.
    pub sandbox: &'a CommandSandbox,
}

/// Runs `cmd`, handing each line of its combined output (line break included, decoded lossily) to
/// `on_line` as it arrives. Fails only if the process cannot be started.
pub(crate) async fn run(
    cmd: ShellCommand<'_>,
    limits: Limits,
    cancel: &CancellationToken,
    on_line: &mut (dyn FnMut(&str) + Send),
) -> io::Result<Outcome> {
    let deadline = Instant::now() + limits.timeout;
    let (reader, writer) = io::pipe()?;
    let writer = OwnedFd::from(writer);
    kimi_core::guardian::start();
    // Our copies of the pipe's write end go with the spawn: EOF comes when the command's do.
    let mut child = procgroup::spawn_shell(
        cmd.shell,
        cmd.command,
        cmd.cwd,
        cmd.sandbox,
        writer.try_clone()?,
        writer,
    )
    .await?;
    let group = match child.id() {
        Some(pid) => GroupGuard::watch(pid),
        None => return Err(io::Error::other("the shell exited before it could be tracked")),
    };
    let mut output = Output {
        pipe: Some(pipe::Receiver::from_owned_fd(reader.into())?),
        ..Output::default()
    };

    let stop = loop {
        if output.pipe.is_none() {
            break None;
        }
        tokio::select! {
            biased;
            () = cancel.cancelled() => break Some(Outcome::Cancelled),
            () = tokio::time::sleep_until(deadline) => break Some(Outcome::TimedOut),
            () = output.pump(on_line) => {}
        }
    };
    let stop = match stop {
        Some(stop) => stop,
        None => tokio::select! {
            biased;
            () = cancel.cancelled() => Outcome::Cancelled,
            () = tokio::time::sleep_until(deadline) => Outcome::TimedOut,
            status = child.wait() => {
                group.disarm();
                return Ok(Outcome::Exited(procgroup::exit_code(status?)));
            }
        },
    };

    terminate(&mut child, &group, &mut output, limits.grace, on_line).await;
    output.finish(on_line);
    group.disarm();
    Ok(stop)
}

/// SIGTERM to the group, a grace period while the pipe keeps draining, SIGKILL to whatever is left, then
/// a short, bounded wait for the last output and the exit status.
async fn terminate(
    child: &mut GroupChild,
    group: &GroupGuard,
    output: &mut Output,
    grace: Duration,
    on_line: &mut (dyn FnMut(&str) + Send),
) {
    group.signal(Signal::SIGTERM);
    let grace_end = Instant::now() + grace;
    loop {
        // Reap the shell itself, or its zombie would keep the group "alive".
        let _ = child.try_wait();
        if !group.is_alive() || Instant::now() >= grace_end {
            break;
        }
        tokio::select! {
            () = output.pump(on_line) => {}
            () = tokio::time::sleep(GRACE_POLL) => {}
        }
    }
    group.signal(Signal::SIGKILL);
    let _ = tokio::time::timeout(DRAIN_AFTER_KILL, async {
        while output.pipe.is_some() {
            output.pump(on_line).await;
        }
    })
    .await;
    let _ = tokio::time::timeout(DRAIN_AFTER_KILL, child.wait()).await;
}

/// The read side of the output pipe and the line being assembled.
#[derive(Debug, Default)]
struct Output {
    /// `None` once the pipe reached EOF (or failed).
    pipe: Option<pipe::Receiver>,
    /// Bytes of the current, unfinished line.
    pending: Vec<u8>,
    buf: Vec<u8>,
}

impl Output {
    /// Reads once and passes on every completed line; never completes once the pipe is closed.
    async fn pump(&mut self, on_line: &mut (dyn FnMut(&str) + Send)) {
        let Some(pipe) = self.pipe.as_mut() else {
            return std::future::pending().await;
        };
        if self.buf.len() != READ_CHUNK {
            self.buf.resize(READ_CHUNK, 0);
        }
        match pipe.read(&mut self.buf).await {
            Ok(0) => self.close(on_line),
            Ok(n) => {
                let mut data = &self.buf[..n];
                while let Some(pos) = data.iter().position(|&b| b == b'\n') {
                    self.pending.extend_from_slice(&data[..=pos]);
                    emit(&self.pending, on_line);
                    self.pending.clear();
                    data = &data[pos + 1..];
                }
                self.pending.extend_from_slice(data);
                if self.pending.len() > MAX_PENDING_LINE {
                    let cut = char_boundary(&self.pending, MAX_PENDING_LINE);
                    emit(&self.pending[..cut], on_line);
                    self.pending.drain(..cut);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                tracing::warn!(error = %e, "reading command output failed; treating it as the end");
                self.close(on_line);
            }
        }
    }

    fn close(&mut self, on_line: &mut (dyn FnMut(&str) + Send)) {
        self.pipe = None;
        self.finish(on_line);
    }

    /// Passes on the unfinished last line, if any.
    fn finish(&mut self, on_line: &mut (dyn FnMut(&str) + Send)) {
        if !self.pending.is_empty() {
            emit(&self.pending, on_line);
            self.pending.clear();
        }
    }
}

fn emit(bytes: &[u8], on_line: &mut (dyn FnMut(&str) + Send)) {
    on_line(&String::from_utf8_lossy(bytes));
}

/// The largest cut at or below `at` that does not split a UTF-8 sequence (if the bytes are UTF-8).
fn char_boundary(bytes: &[u8], at: usize) -> usize {
    let mut cut = at.min(bytes.len());
    for _ in 0..3 {
        match bytes.get(cut) {
            Some(b) if (0x80..0xc0).contains(b) && cut > 0 => cut -= 1,
            _ => break,
        }
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::path::PathBuf;

    const FAST: Limits = Limits {
        timeout: Duration::from_secs(20),
        grace: Duration::from_millis(300),
    };

    fn bash() -> PathBuf {
        crate::shell::find_shell().0
    }

    async fn run_collect(command: &str, limits: Limits, cancel: &CancellationToken) -> (Outcome, String) {
        let shell = bash();
        let dir = std::env::temp_dir();
        let mut out = String::new();
        let outcome = run(
            ShellCommand {
                shell: &shell,
                command,
                cwd: &dir,
                sandbox: &CommandSandbox::unconfined(),
            },
            limits,
            cancel,
            &mut |line| out.push_str(line),
        )
        .await
        .unwrap();
        (outcome, out)
    }

    /// Whether a process with this pid still runs (zombies awaiting their reaper count as gone).
    fn pid_running(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z'),
            Err(_) => false,
        }
    }

    /// Waits briefly for `pid` to finish dying: SIGKILL is delivered asynchronously, and the pipe can
    /// reach EOF a moment before the process state says so.
    async fn gone_soon(pid: i32) -> bool {
        for _ in 0..100 {
            if !pid_running(pid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    #[tokio::test]
    async fn output_order_follows_the_writes() {
        let (outcome, out) = run_collect(
            "echo one; echo two >&2; echo three; echo four >&2",
            FAST,
            &CancellationToken::new(),
        )
        .await;
        assert_eq!(outcome, Outcome::Exited(0));
        assert_eq!(out, "one\ntwo\nthree\nfour\n");
    }

    #[tokio::test]
    async fn exit_codes_and_signals() {
        let cancel = CancellationToken::new();
        assert_eq!(run_collect("exit 3", FAST, &cancel).await.0, Outcome::Exited(3));
        assert_eq!(
            run_collect("kill -9 $$", FAST, &cancel).await.0,
            Outcome::Exited(-9)
        );
    }

    #[tokio::test]
    async fn stdin_is_closed_and_the_last_line_needs_no_newline() {
        let (outcome, out) = run_collect("cat; printf 'no newline'", FAST, &CancellationToken::new()).await;
        assert_eq!(outcome, Outcome::Exited(0));
        assert_eq!(out, "no newline");
    }

    #[tokio::test]
    async fn invalid_utf8_is_replaced() {
        let (_, out) = run_collect(r"printf 'a\377b\n'", FAST, &CancellationToken::new()).await;
        assert_eq!(out, "a\u{fffd}b\n");
    }

    #[tokio::test]
    async fn timeout_kills_a_grandchild_that_ignores_sigterm() {
        let pid_file = tempfile::NamedTempFile::new().unwrap();
        let path = pid_file.path().display().to_string();
        let command = format!("bash -c 'trap \"\" TERM; echo $$ > {path}; echo started; sleep 100' & wait");
        let limits = Limits {
            timeout: Duration::from_secs(1),
            grace: Duration::from_millis(300),
        };
        // A deadline on the awaited outcome, far under the grandchild's 100 s: SIGKILL followed the grace.
        let (outcome, out) = tokio::time::timeout(
            Duration::from_secs(4),
            run_collect(&command, limits, &CancellationToken::new()),
        )
        .await
        .expect("the timeout killed the grandchild that ignores SIGTERM");
        assert_eq!(outcome, Outcome::TimedOut);
        assert_eq!(out, "started\n");
        let pid: i32 = std::fs::read_to_string(pid_file.path())
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(gone_soon(pid).await, "grandchild {pid} survived");
    }

    #[tokio::test]
    async fn a_process_that_left_the_group_cannot_hold_us() {
        // `setsid` puts the sleeper beyond the group kill while it keeps the pipe open.
        if std::process::Command::new("setsid")
            .arg("--version")
            .output()
            .is_err()
        {
            return;
        }
        let limits = Limits {
            timeout: Duration::from_millis(500),
            grace: Duration::from_millis(200),
        };
        // A deadline under the sleeper's 3 s on the awaited outcome: its open pipe did not hold us.
        let (outcome, _) = tokio::time::timeout(
            Duration::from_secs(2),
            run_collect("setsid sleep 3 & wait", limits, &CancellationToken::new()),
        )
        .await
        .expect("the outcome came while the escaped sleeper still held the pipe");
        assert_eq!(outcome, Outcome::TimedOut);
    }

    #[tokio::test]
    async fn cancel_kills_the_group() {
        let pid_file = tempfile::NamedTempFile::new().unwrap();
        let path = pid_file.path().display().to_string();
        let command = format!("bash -c 'trap \"\" TERM; echo $$ > {path}; echo started; sleep 100' & wait");
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        let pid_path = pid_file.path().to_owned();
        tokio::spawn(async move {
            // Wait until the grandchild has written its pid, then cancel.
            for _ in 0..200 {
                if std::fs::read_to_string(&pid_path).is_ok_and(|s| s.ends_with('\n')) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            trigger.cancel();
        });
        let (outcome, _) = run_collect(&command, FAST, &cancel).await;
        assert_eq!(outcome, Outcome::Cancelled);
        let pid: i32 = std::fs::read_to_string(pid_file.path())
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(gone_soon(pid).await, "grandchild {pid} survived");
    }

    #[tokio::test]
    async fn dropping_the_run_kills_the_group() {
        let pid_file = tempfile::NamedTempFile::new().unwrap();
        let path = pid_file.path().display().to_string();
        let command = format!("bash -c 'echo $$ > {path}; sleep 100' & wait");
        let shell = bash();
        let dir = std::env::temp_dir();
        let cancel = CancellationToken::new();
        let mut sink = |_: &str| {};
        let unconfined = CommandSandbox::unconfined();
        let fut = run(
            ShellCommand {
                shell: &shell,
                command: &command,
                cwd: &dir,
                sandbox: &unconfined,
            },
            FAST,
            &cancel,
            &mut sink,
        );
        let waited = tokio::time::timeout(Duration::from_secs(1), fut).await;
        assert!(waited.is_err());
        let pid: i32 = std::fs::read_to_string(pid_file.path())
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(gone_soon(pid).await, "grandchild {pid} survived the drop");
    }

    #[tokio::test]
    async fn very_long_lines_are_passed_on_in_pieces() {
        let shell = bash();
        let dir = std::env::temp_dir();
        let mut pieces = Vec::new();
        let outcome = run(
            ShellCommand {
                shell: &shell,
                command: "head -c 600000 /dev/zero | tr '\\0' x",
                cwd: &dir,
                sandbox: &CommandSandbox::unconfined(),
            },
            FAST,
            &CancellationToken::new(),
            &mut |line| pieces.push(line.len()),
        )
        .await
        .unwrap();
        assert_eq!(outcome, Outcome::Exited(0));
        assert_eq!(pieces.iter().sum::<usize>(), 600_000);
        assert!(pieces.iter().all(|&n| n <= MAX_PENDING_LINE + READ_CHUNK));
        assert!(pieces.len() >= 2);
    }

    #[test]
    fn char_boundary_backs_off_continuation_bytes() {
        let bytes = "aé".as_bytes(); // 61 c3 a9
        assert_eq!(char_boundary(bytes, 2), 1);
        assert_eq!(char_boundary(bytes, 1), 1);
        assert_eq!(char_boundary(b"abc", 2), 2);
    }
}
