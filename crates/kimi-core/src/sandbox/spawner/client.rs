//! The agent's end of one spawner: starting it, asking it to start commands, and a reader thread that
//! turns its replies into the answers and exit statuses the callers wait for.
//!
//! The reader is a thread of its own, not a task, so it works under any runtime (or none) and a
//! spawner outlives the runtime that started it without harm. It is the only reader of the socket; it
//! parks on a blocking read, costs no CPU, and ends when the spawner does.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{oneshot, watch};

use super::wire::{self, Init, REPLY, Reply, Request, Spawn};
use crate::sandbox::child::PrivateNetwork;

/// How to start a spawner process: our own binary with the hidden argument, or (unit tests) the test
/// binary running the spawner's entry test.
#[derive(Debug, Clone)]
pub(crate) struct Launcher {
    pub program: PathBuf,
    /// Its arguments, without the program.
    pub args: Vec<OsString>,
    /// Set after the children's environment.
    pub env: Vec<(OsString, OsString)>,
}

impl Launcher {
    /// `kimi-agent __sandbox-spawner`, through `/proc/self/exe` so a binary replaced on disk since the
    /// agent started still starts the agent's own code.
    pub(crate) fn this_binary() -> Self {
        Self {
            program: PathBuf::from("/proc/self/exe"),
            args: vec![super::SUBCOMMAND.into()],
            env: Vec::new(),
        }
    }
}

/// What one spawner confines its commands to: fixed for its life.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    /// Landlock's ABI number for the rules, 0 when files are not confined.
    pub abi: u32,
    pub roots: Vec<PathBuf>,
    pub network: Option<Arc<PrivateNetwork>>,
}

/// A command as the spawner starts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnRequest {
    /// An absolute path.
    pub program: PathBuf,
    /// Its arguments, without the program.
    pub args: Vec<OsString>,
    /// The whole environment (nothing is inherited from the spawner), later entries winning.
    pub env: Vec<(OsString, OsString)>,
    /// Where it runs.
    pub cwd: PathBuf,
}

/// Where a spawned command's stdin, stdout and stderr go: our copies are closed once sent.
#[derive(Debug)]
pub struct SpawnStdio {
    /// Its standard input.
    pub stdin: OwnedFd,
    /// Its standard output.
    pub stdout: OwnedFd,
    /// Its standard error.
    pub stderr: OwnedFd,
}

/// A running spawner.
#[derive(Debug)]
pub(crate) struct Spawner {
    policy: Policy,
    pid: u32,
    /// The write side; requests are written whole under the lock.
    socket: Mutex<UnixStream>,
    next_id: AtomicU64,
    shared: Arc<Shared>,
    /// Becomes `true` when the spawner has ended (or cannot be trusted any longer).
    gone: watch::Receiver<bool>,
}

/// What the reader thread and the callers share.
#[derive(Debug, Default)]
struct Shared {
    /// Requests waiting for their `Spawned` or `Failed`.
    pending: Mutex<HashMap<u64, oneshot::Sender<Started>>>,
    /// Started commands waiting for their `Exited`.
    exits: Mutex<HashMap<u32, oneshot::Sender<ExitStatus>>>,
}

#[derive(Debug)]
enum Started {
    Spawned(u32, oneshot::Receiver<ExitStatus>),
    Failed(i32),
}

/// How long a new spawner may take to confine itself and say so (it normally takes milliseconds).
const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Why a command was not started: the spawner is not there to start it.
fn gone_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "the sandbox's spawner process ended; the next command starts a new one",
    )
}

impl Spawner {
    /// Starts a spawner confined to `policy` and waits until it says it is.
    pub(crate) async fn start(launcher: &Launcher, policy: Policy) -> io::Result<Self> {
        let (ours, theirs) = UnixStream::pair()?;
        let mut command = std::process::Command::new(&launcher.program);
        command
            .args(&launcher.args)
            .env_clear()
            .envs(crate::child_env::current().vars())
            .envs(launcher.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = command.spawn()?;
        drop(command);
        let pid = child.id();
        let shared = Arc::new(Shared::default());
        let (ready_tx, ready_rx) = oneshot::channel();
        let (gone_tx, gone) = watch::channel(false);
        let reader = Reader {
            socket: ours.try_clone()?,
            shared: Arc::clone(&shared),
            ready: Some(ready_tx),
            gone: gone_tx,
            child,
        };
        std::thread::Builder::new()
            .name("sandbox-spawner".into())
            .stack_size(256 * 1024)
            .spawn(move || reader.run())?;
        let init = Request::Init(Init {
            abi: policy.abi,
            roots: policy.roots.clone(),
            network: policy.network.is_some(),
        });
        let fds: Vec<BorrowedFd<'_>> = match &policy.network {
            Some(network) => {
                let (net, user) = network.fds();
                std::iter::once(net).chain(user).collect()
            }
            None => Vec::new(),
        };
        let spawner = Self {
            policy: policy.clone(),
            pid,
            socket: Mutex::new(ours),
            next_id: AtomicU64::new(1),
            shared,
            gone,
        };
        // A helper that ended at once may close its end before the set-up reaches it: that is the same
        // "ended before it was ready" as a helper that reads it and exits.
        let sent = wire::send(&crate::sync::lock(&spawner.socket), &init, &fds);
        if let Err(e) = sent
            && e.kind() != io::ErrorKind::BrokenPipe
        {
            return Err(e);
        }
        // A helper that neither answers nor ends (stopped, stuck in the kernel) must not hold up every
        // confined command after it: past the limit it is killed, and the command fails as with a
        // helper that ended.
        let Ok(ready) = tokio::time::timeout(READY_TIMEOUT, ready_rx).await else {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX)),
                nix::sys::signal::Signal::SIGKILL,
            );
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the sandbox's spawner process did not get ready in time; it was killed",
            ));
        };
        match ready {
            Ok(Ok(())) => Ok(spawner),
            Ok(Err(errno)) => Err(io::Error::new(
                io::Error::from_raw_os_error(errno).kind(),
                format!(
                    "the sandbox's spawner could not confine itself: {}",
                    io::Error::from_raw_os_error(errno)
                ),
            )),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the sandbox's spawner process ended before it was ready",
            )),
        }
    }

    /// Whether it confines to `abi` and `roots`, and still runs.
    pub(crate) fn serves(&self, abi: u32, roots: &[PathBuf]) -> bool {
        self.is_alive() && self.policy.abi == abi && self.policy.roots == roots
    }

    pub(crate) fn is_alive(&self) -> bool {
        !*self.gone.borrow()
    }

    /// The spawner process's id.
    #[cfg(test)]
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Resolves once the spawner is known to have ended.
    #[cfg(test)]
    pub(crate) async fn ended(&self) {
        let mut gone = self.gone.clone();
        let _ = gone.wait_for(|gone| *gone).await;
    }

    /// Starts `request` with `stdio`; its pid (its process group's id) and its exit to come.
    pub(crate) async fn spawn(&self, request: SpawnRequest, stdio: SpawnStdio) -> io::Result<SpawnedChild> {
        if !self.is_alive() {
            return Err(gone_error());
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        crate::sync::lock(&self.shared.pending).insert(id, tx);
        let message = Request::Spawn(Spawn {
            id,
            program: request.program,
            args: request.args,
            env: request.env,
            cwd: request.cwd,
        });
        let fds = [stdio.stdin.as_fd(), stdio.stdout.as_fd(), stdio.stderr.as_fd()];
        let sent = wire::send(&crate::sync::lock(&self.socket), &message, &fds);
        drop(stdio);
        if let Err(e) = sent {
            crate::sync::lock(&self.shared.pending).remove(&id);
            tracing::warn!(pid = self.pid, error = %e, "the sandbox's spawner cannot be reached");
            return Err(gone_error());
        }
        match rx.await {
            Ok(Started::Spawned(pid, exit)) => Ok(SpawnedChild {
                pid,
                exit,
                status: None,
            }),
            Ok(Started::Failed(errno)) => Err(io::Error::from_raw_os_error(errno)),
            Err(_) => Err(gone_error()),
        }
    }
}

impl Drop for Spawner {
    fn drop(&mut self) {
        // Retired: the spawner reads no more, reports the ends of what it started, then exits.
        let _ = crate::sync::lock(&self.socket).shutdown(std::net::Shutdown::Write);
    }
}

/// The reader thread's state.
struct Reader {
    socket: UnixStream,
    shared: Arc<Shared>,
    ready: Option<oneshot::Sender<Result<(), i32>>>,
    gone: watch::Sender<bool>,
    child: std::process::Child,
}

impl Reader {
    fn run(mut self) {
        let mut buf = [0u8; REPLY];
        while self.socket.read_exact(&mut buf).is_ok() {
            let Some(reply) = Reply::decode(&buf) else {
                tracing::warn!(
                    pid = self.child.id(),
                    "the sandbox's spawner sent garbage; it is dropped"
                );
                let _ = self.child.kill();
                break;
            };
            if !self.handle(reply) {
                break;
            }
        }
        self.gone.send_replace(true);
        // Every waiter learns the spawner is gone: their senders are dropped.
        crate::sync::lock(&self.shared.pending).clear();
        crate::sync::lock(&self.shared.exits).clear();
        drop(self.ready.take());
        let _ = self.child.wait();
    }

    /// `false` when the spawner is done.
    fn handle(&mut self, reply: Reply) -> bool {
        match reply {
            Reply::Ready => {
                if let Some(ready) = self.ready.take() {
                    let _ = ready.send(Ok(()));
                }
            }
            Reply::InitFailed(errno) => {
                if let Some(ready) = self.ready.take() {
                    let _ = ready.send(Err(errno));
                }
                return false;
            }
            Reply::Spawned { id, pid } => {
                let Some(waiter) = crate::sync::lock(&self.shared.pending).remove(&id) else {
                    return true;
                };
                let (exit_tx, exit_rx) = oneshot::channel();
                crate::sync::lock(&self.shared.exits).insert(pid, exit_tx);
                if waiter.send(Started::Spawned(pid, exit_rx)).is_err() {
                    // Nobody waits for it any more (the call was dropped): nobody would stop it either.
                    crate::sync::lock(&self.shared.exits).remove(&pid);
                    // Its group is its own (the spawner starts each command as a group leader); gone
                    // already is fine. Not through `procgroup`, which spawns through this module.
                    if let Ok(pgid) = i32::try_from(pid) {
                        let _ = nix::sys::signal::killpg(
                            nix::unistd::Pid::from_raw(pgid),
                            nix::sys::signal::Signal::SIGKILL,
                        );
                    }
                }
            }
            Reply::Failed { id, errno } => {
                if let Some(waiter) = crate::sync::lock(&self.shared.pending).remove(&id) {
                    let _ = waiter.send(Started::Failed(errno));
                }
            }
            Reply::Exited { pid, status } => {
                if let Some(waiter) = crate::sync::lock(&self.shared.exits).remove(&pid) {
                    use std::os::unix::process::ExitStatusExt;
                    let _ = waiter.send(ExitStatus::from_raw(status));
                }
            }
        }
        true
    }
}

/// A command the spawner started: the leader of its own process group (stopped through the group, as
/// every command is), whose exit the spawner reports.
#[derive(Debug)]
pub struct SpawnedChild {
    pid: u32,
    exit: oneshot::Receiver<ExitStatus>,
    status: Option<ExitStatus>,
}

impl SpawnedChild {
    /// Its pid, which is also its process group's id.
    pub fn id(&self) -> u32 {
        self.pid
    }

    /// Waits for it to end. Fails if the spawner ended first: its status is then lost.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        match (&mut self.exit).await {
            Ok(status) => {
                self.status = Some(status);
                Ok(status)
            }
            Err(_) => Err(lost_error()),
        }
    }

    /// Its status if it has ended.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        match self.exit.try_recv() {
            Ok(status) => {
                self.status = Some(status);
                Ok(Some(status))
            }
            Err(oneshot::error::TryRecvError::Empty) => Ok(None),
            Err(oneshot::error::TryRecvError::Closed) => Err(lost_error()),
        }
    }
}

fn lost_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "the sandbox's spawner ended before the command did, so its exit status is unknown",
    )
}

/// `/dev/null`, for a command's stdin.
pub fn null() -> io::Result<OwnedFd> {
    Ok(std::fs::File::open(Path::new("/dev/null"))?.into())
}
