//! [`SessionGate`]: the [`WireAgent`] a process serves whether or not it holds its session.
//!
//! Everything that writes a session's files (the recorder, the context, `state.json`, background tasks,
//! cron jobs, notifications, subagents) is built only once this process holds the session's
//! [`SessionLock`], by the binary's [`SessionOpener`], which keeps the lock for as long as it lives. Until
//! then the gate answers what only reads: `initialize` (with `session_held_by` naming the holder) and
//! `replay` (straight from `wire.jsonl`). `prompt`, `steer` and `set_plan_mode` are refused with
//! [`RpcError::session_in_use`]. Each of them, and each `initialize`, tries the lock again first, so
//! the session is taken over as soon as its holder is gone; the `initialize`s answered meanwhile are
//! then replayed to the opened session, so the client's external tools and hook subscriptions apply.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use kimi_wire::message::UserInput;
use kimi_wire::params::{
    HooksInfo, InitializeParams, InitializeResult, PromptResult, ReplayResult, SandboxInfo,
    ServerCapabilities, ServerInfo, SessionHolderInfo, SetPlanModeResult, SlashCommandInfo, SteerResult,
};
use kimi_wire::{ClientHandle, RpcError, WireAgent};
use tokio_util::sync::CancellationToken;

use crate::events::EventSink;
use crate::hooks::HookEngine;
use crate::runtime::{HOOK_EVENTS, judge_external_tools, replay_wire_file};
use crate::session::Session;
use crate::session_lock::{LockAttempt, LockError, SessionHolder, SessionLock};

/// How long a lock whose holder has died is waited for (see [`SessionGate::acquire`]), and how often it
/// is tried meanwhile.
const ORPHANED_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
const ORPHANED_LOCK_POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// Why a session could not be opened after its lock was taken.
pub type OpenError = Box<dyn std::error::Error + Send + Sync>;

/// Builds everything that writes a session, once its lock is held.
#[async_trait]
pub trait SessionOpener: Send + Sync + 'static {
    /// The opened session.
    type Held: WireAgent;
    /// Opens `session` for writing. `lock` must live as long as the returned agent writes: the opener
    /// keeps it and releases it last. On an error the lock is dropped, and the session stays free.
    async fn open(&self, session: Session, lock: SessionLock) -> Result<Arc<Self::Held>, OpenError>;
}

/// What `initialize` reports while another process holds the session: the same facts the opened
/// session would report (the sandbox extension field included), gathered without writing anything.
#[derive(Debug)]
pub struct ReadOnlyFacts {
    /// Our name and version.
    pub server: ServerInfo,
    /// The slash commands (built-in and skills).
    pub slash_commands: Vec<SlashCommandInfo>,
    /// The names of the agent's built-in tools: an external tool may not take one.
    pub builtin_tools: BTreeSet<String>,
    /// A hook engine of the gate's own, never triggered: it counts the configured hooks and the
    /// client's subscriptions. The opened session has its own engine, which the replayed
    /// `initialize`s fill.
    pub hooks: HookEngine,
    /// How the model's commands are confined (the sandbox extension field), for the session's extra
    /// directories as they were at start.
    pub sandbox: SandboxInfo,
}

/// Why this process does not write the session now.
#[derive(Debug, thiserror::Error)]
pub enum NotHeld {
    /// Another process holds it.
    #[error("the session is held by another process ({0})")]
    Held(SessionHolder),
    /// The lock could not be tried.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The lock was ours, but opening the session failed (and the lock was let go).
    #[error("the session could not be opened: {0}")]
    Open(OpenError),
}

/// Serves one session, held by this process or not. See the module docs.
pub struct SessionGate<O: SessionOpener> {
    session: Session,
    client: ClientHandle,
    opener: O,
    facts: ReadOnlyFacts,
    /// Set once, when this process takes the session; read without waiting from then on.
    held: OnceLock<Arc<O::Held>>,
    /// The `initialize`s answered before the session was ours, to replay to it. Also serializes
    /// attempts to take the session (a Tokio mutex: it is held across the opening), so an
    /// `initialize` is either recorded before a takeover or sees it done.
    pending: tokio::sync::Mutex<Vec<InitializeParams>>,
}

impl<O: SessionOpener> std::fmt::Debug for SessionGate<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionGate")
            .field("session", &self.session.id)
            .field("held", &self.held.get().is_some())
            .finish_non_exhaustive()
    }
}

impl<O: SessionOpener> SessionGate<O> {
    /// A gate for `session`; nothing is locked or opened until [`SessionGate::take_over`] or the first
    /// method call.
    pub fn new(session: Session, client: ClientHandle, facts: ReadOnlyFacts, opener: O) -> Self {
        Self {
            session,
            client,
            opener,
            facts,
            held: OnceLock::new(),
            pending: tokio::sync::Mutex::new(Vec::new()),
        }
    }

    /// The opened session, if this process holds it.
    pub fn held(&self) -> Option<&Arc<O::Held>> {
        self.held.get()
    }

    /// Takes the session if nobody holds it and opens it; returns it when this process holds it.
    pub async fn take_over(&self) -> Result<&Arc<O::Held>, NotHeld> {
        if let Some(held) = self.held.get() {
            return Ok(held);
        }
        let mut pending = self.pending.lock().await;
        self.take_over_locked(&mut pending).await
    }

    async fn take_over_locked(&self, pending: &mut Vec<InitializeParams>) -> Result<&Arc<O::Held>, NotHeld> {
        if let Some(held) = self.held.get() {
            return Ok(held);
        }
        let existed = self.session.dir.is_dir();
        let lock = self.acquire().await?;
        let mut session = self.session.clone();
        // The holder may have deleted the session as empty on its way out: it is a new one again.
        session.resumed &= existed;
        tracing::info!(session = %session.id, lock = %lock.path().display(), "session lock taken");
        let held = self.opener.open(session, lock).await.map_err(NotHeld::Open)?;
        for params in pending.drain(..) {
            if let Err(e) = held.initialize(params).await {
                tracing::warn!(error = %e, "an earlier initialize could not be applied to the session");
            }
        }
        Ok(self.held.get_or_init(|| held))
    }

    /// The session's lock, if nobody holds it. A lock whose named holder is dead (a restart right after
    /// a crash) is held for a moment more by a child the holder forked as it died; that is waited for,
    /// briefly, rather than serving the session read-only, unrepaired, for the whole run.
    async fn acquire(&self) -> Result<SessionLock, NotHeld> {
        let deadline = tokio::time::Instant::now() + ORPHANED_LOCK_WAIT;
        loop {
            match SessionLock::try_acquire(&self.session.dir)? {
                LockAttempt::Acquired(lock) => return Ok(lock),
                LockAttempt::Held(holder) if holder.is_gone() && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(ORPHANED_LOCK_POLL).await;
                }
                LockAttempt::Held(holder) => return Err(NotHeld::Held(holder)),
            }
        }
    }

    /// The error a writing method gets when the session is not ours.
    fn refusal(&self, reason: NotHeld) -> RpcError {
        match reason {
            NotHeld::Held(holder) => RpcError::session_in_use(&self.session.id, holder.pid),
            other => {
                tracing::error!(session = %self.session.id, error = %other, "session not taken over");
                RpcError::internal(other.to_string())
            }
        }
    }

    /// The session for a method that writes, taken over if it is free now.
    async fn writer(&self) -> Result<&Arc<O::Held>, RpcError> {
        self.take_over().await.map_err(|e| self.refusal(e))
    }

    /// `initialize` while the session is not ours (held by `holder`, or not lockable at all): what the
    /// session offers, and who holds it.
    fn read_only_initialize(
        &self,
        params: InitializeParams,
        holder: Option<SessionHolder>,
    ) -> InitializeResult {
        let events = EventSink::new(self.client.clone(), None);
        let external_tools = match params.external_tools {
            Some(tools) if !tools.is_empty() => Some(judge_external_tools(
                tools,
                &events,
                |name| self.facts.builtin_tools.contains(name),
                drop,
            )),
            _ => None,
        };
        self.facts
            .hooks
            .attach_wire(params.hooks.unwrap_or_default(), events);
        InitializeResult {
            protocol_version: kimi_wire::PROTOCOL_VERSION.to_owned(),
            server: self.facts.server.clone(),
            slash_commands: self.facts.slash_commands.clone(),
            external_tools,
            hooks: HooksInfo {
                supported_events: HOOK_EVENTS.iter().map(|e| (*e).to_owned()).collect(),
                configured: self.facts.hooks.configured_counts().into_iter().collect(),
            },
            capabilities: ServerCapabilities {
                supports_question: true,
            },
            sandbox: Some(self.facts.sandbox.clone()),
            session_held_by: holder.map(|holder| SessionHolderInfo { pid: holder.pid }),
        }
    }
}

#[async_trait]
impl<O: SessionOpener> WireAgent for SessionGate<O> {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult, RpcError> {
        let mut pending = self.pending.lock().await;
        match self.take_over_locked(&mut pending).await {
            Ok(held) => {
                let held = Arc::clone(held);
                drop(pending);
                held.initialize(params).await
            }
            Err(NotHeld::Held(holder)) => {
                pending.push(params.clone());
                Ok(self.read_only_initialize(params, Some(holder)))
            }
            // Nobody holds it, but it cannot be locked (an unwritable session directory): the client
            // still gets its handshake, and each write the reason it is refused.
            Err(NotHeld::Lock(e)) => {
                tracing::error!(session = %self.session.id, error = %e, "session not lockable; serving reads only");
                pending.push(params.clone());
                Ok(self.read_only_initialize(params, None))
            }
            Err(other) => Err(self.refusal(other)),
        }
    }

    async fn prompt(&self, input: UserInput, cancel: CancellationToken) -> Result<PromptResult, RpcError> {
        self.writer().await?.prompt(input, cancel).await
    }

    async fn steer(&self, input: UserInput) -> Result<SteerResult, RpcError> {
        self.writer().await?.steer(input).await
    }

    async fn set_plan_mode(&self, enabled: bool) -> Result<SetPlanModeResult, RpcError> {
        self.writer().await?.set_plan_mode(enabled).await
    }

    async fn writable(&self) -> Result<(), RpcError> {
        self.writer().await.map(drop)
    }

    async fn side_question(&self, question: String) -> Result<PromptResult, RpcError> {
        // Recorded in wire.jsonl, so it writes the session like a prompt.
        self.writer().await?.side_question(question).await
    }

    async fn replay(&self, cancel: CancellationToken) -> Result<ReplayResult, RpcError> {
        match self.held.get() {
            Some(held) => held.replay(cancel).await,
            // Reads only: the holder's last record may still be on its way, and is then left out.
            None => replay_wire_file(&self.session.wire_path(), &self.client, &cancel).await,
        }
    }

    async fn shutdown(&self) {
        if let Some(held) = self.held.get() {
            held.shutdown().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use kimi_wire::params::{PromptStatus, ReplayStatus};
    use kimi_wire::{Server, ServerConfig};

    use super::*;
    use crate::session::{SessionChoice, open};

    /// An opened session that records what reached it.
    #[derive(Debug, Default)]
    struct Opened {
        lock: Mutex<Option<SessionLock>>,
        initializes: Mutex<Vec<InitializeParams>>,
        resumed: bool,
    }

    #[async_trait]
    impl WireAgent for Opened {
        async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult, RpcError> {
            self.initializes.lock().unwrap().push(params);
            Err(RpcError::internal("initialize reached the opened session"))
        }
        async fn prompt(&self, _: UserInput, _: CancellationToken) -> Result<PromptResult, RpcError> {
            Ok(PromptResult {
                status: PromptStatus::Finished,
                steps: None,
            })
        }
        async fn steer(&self, _: UserInput) -> Result<SteerResult, RpcError> {
            Ok(SteerResult::default())
        }
        async fn set_plan_mode(&self, enabled: bool) -> Result<SetPlanModeResult, RpcError> {
            Ok(SetPlanModeResult::new(enabled))
        }
        async fn replay(&self, _: CancellationToken) -> Result<ReplayResult, RpcError> {
            Err(RpcError::internal("replay reached the opened session"))
        }
        async fn shutdown(&self) {
            self.lock.lock().unwrap().take();
        }
    }

    #[derive(Default)]
    struct Opener {
        opens: AtomicUsize,
        fail: bool,
    }

    #[async_trait]
    impl SessionOpener for Arc<Opener> {
        type Held = Opened;
        async fn open(&self, session: Session, lock: SessionLock) -> Result<Arc<Opened>, OpenError> {
            self.opens.fetch_add(1, Ordering::SeqCst);
            if self.fail {
                return Err("the agent file is broken".into());
            }
            Ok(Arc::new(Opened {
                lock: Mutex::new(Some(lock)),
                initializes: Mutex::default(),
                resumed: session.resumed,
            }))
        }
    }

    fn facts() -> ReadOnlyFacts {
        ReadOnlyFacts {
            server: ServerInfo {
                name: "kimi-agent".into(),
                version: "0".into(),
            },
            slash_commands: Vec::new(),
            builtin_tools: ["Shell".to_owned()].into(),
            hooks: HookEngine::new(Vec::new(), "/w".into(), "s".into()),
            sandbox: crate::sandbox::Sandbox::off().info(Path::new("/w"), &[]),
        }
    }

    fn gate(share: &Path, opener: &Arc<Opener>) -> SessionGate<Arc<Opener>> {
        let session = open(share, Path::new("/w"), &SessionChoice::Id("s1".into())).unwrap();
        let (_server, client) = Server::new(ServerConfig::default());
        SessionGate::new(session, client, facts(), Arc::clone(opener))
    }

    fn init_params(tools: serde_json::Value) -> InitializeParams {
        serde_json::from_value(serde_json::json!({"protocol_version": "1.10", "external_tools": tools}))
            .unwrap()
    }

    fn text(s: &str) -> UserInput {
        UserInput::Text(s.into())
    }

    #[tokio::test]
    async fn a_free_session_is_opened_once_and_keeps_its_lock() {
        let share = tempfile::tempdir().unwrap();
        let opener = Arc::new(Opener::default());
        let first = gate(share.path(), &opener);
        assert!(first.held().is_none());
        first.take_over().await.unwrap();
        first.prompt(text("hi"), CancellationToken::new()).await.unwrap();
        first.set_plan_mode(true).await.unwrap();
        assert_eq!(opener.opens.load(Ordering::SeqCst), 1);
        let other = gate(share.path(), &Arc::new(Opener::default()));
        assert!(matches!(other.take_over().await, Err(NotHeld::Held(_))));
    }

    #[tokio::test]
    async fn writes_are_refused_while_held_and_taken_over_once_the_holder_lets_go() {
        let share = tempfile::tempdir().unwrap();
        let first = gate(share.path(), &Arc::new(Opener::default()));
        first.take_over().await.unwrap();
        let opener = Arc::new(Opener::default());
        let second = gate(share.path(), &opener);

        let refused = second
            .prompt(text("hi"), CancellationToken::new())
            .await
            .unwrap_err();
        let expected = RpcError::session_in_use("s1", Some(std::process::id()));
        assert_eq!(refused, expected);
        assert_eq!(second.steer(text("more")).await.unwrap_err(), expected);
        // What the server asks before it answers a `steer` with no turn running.
        assert_eq!(second.writable().await.unwrap_err(), expected);
        assert_eq!(second.set_plan_mode(true).await.unwrap_err(), expected);
        assert_eq!(opener.opens.load(Ordering::SeqCst), 0);

        // The read-only initialize names the holder and judges tools against the built-ins; it is
        // replayed to the session once this process opens it.
        let tools = serde_json::json!([
            {"name": "Shell", "description": "d", "parameters": {"type": "object"}},
            {"name": "Mine", "description": "d", "parameters": {"type": "object"}},
        ]);
        let result = second.initialize(init_params(tools.clone())).await.unwrap();
        assert_eq!(
            result.session_held_by,
            Some(SessionHolderInfo {
                pid: Some(std::process::id())
            })
        );
        // The sandbox is reported as the opened session would report it.
        assert_eq!(result.sandbox, Some(facts().sandbox));
        let verdicts = result.external_tools.unwrap();
        assert_eq!(verdicts.accepted, ["Mine"]);
        assert_eq!(verdicts.rejected[0].name, "Shell");

        first.shutdown().await;
        let status = second.prompt(text("hi"), CancellationToken::new()).await.unwrap();
        assert_eq!(status.status, PromptStatus::Finished);
        let held = second.held().unwrap();
        assert_eq!(*held.initializes.lock().unwrap(), [init_params(tools)]);
        assert!(held.resumed);
    }

    #[tokio::test]
    async fn replay_reads_the_file_without_taking_the_session() {
        let share = tempfile::tempdir().unwrap();
        let first = gate(share.path(), &Arc::new(Opener::default()));
        first.take_over().await.unwrap();
        let second = gate(share.path(), &Arc::new(Opener::default()));
        let replayed = second.replay(CancellationToken::new()).await.unwrap();
        assert_eq!(replayed.status, ReplayStatus::Finished);
        assert!(second.held().is_none());
    }

    #[tokio::test]
    async fn a_failed_opening_is_an_internal_error_and_frees_the_session() {
        let share = tempfile::tempdir().unwrap();
        let broken = Arc::new(Opener {
            fail: true,
            ..Opener::default()
        });
        let gate_a = gate(share.path(), &broken);
        let error = gate_a
            .prompt(text("hi"), CancellationToken::new())
            .await
            .unwrap_err();
        assert_eq!(error.code, kimi_wire::error_code::INTERNAL_ERROR);
        assert!(error.message.contains("the agent file is broken"), "{error}");
        let gate_b = gate(share.path(), &Arc::new(Opener::default()));
        gate_b.take_over().await.unwrap();
    }

    #[tokio::test]
    async fn a_session_that_cannot_be_locked_still_reads_and_says_why_it_cannot_write() {
        let share = tempfile::tempdir().unwrap();
        let opener = Arc::new(Opener::default());
        let gate = gate(share.path(), &opener);
        // A directory where the lock file belongs: opening it fails, for root too.
        std::fs::create_dir(gate.session.dir.join(crate::session_lock::LOCK_FILE)).unwrap();
        let init = gate.initialize(init_params(serde_json::json!([]))).await.unwrap();
        assert_eq!(init.session_held_by, None);
        let refused = gate
            .prompt(text("hi"), CancellationToken::new())
            .await
            .unwrap_err();
        assert_eq!(refused.code, kimi_wire::error_code::INTERNAL_ERROR);
        assert!(refused.message.contains("cannot lock the session"), "{refused}");
        assert_eq!(
            gate.replay(CancellationToken::new()).await.unwrap().status,
            ReplayStatus::Finished
        );
        assert_eq!(opener.opens.load(Ordering::SeqCst), 0);
    }

    /// Holds `dir`'s lock as a process that died would leave it: the lock file names a pid that is
    /// gone, while the lock itself is still held (by a forked child, here by this test).
    fn orphaned_lock(dir: &Path) -> SessionLock {
        let LockAttempt::Acquired(lock) = SessionLock::try_acquire(dir).unwrap() else {
            panic!("the session should be free");
        };
        let mut dead = std::process::Command::new("true").spawn().unwrap();
        let pid = dead.id();
        dead.wait().unwrap();
        std::fs::write(lock.path(), format!("{pid}\n")).unwrap();
        lock
    }

    #[tokio::test(start_paused = true)]
    async fn a_lock_whose_holder_died_is_waited_for_until_it_is_let_go() {
        let share = tempfile::tempdir().unwrap();
        let second = gate(share.path(), &Arc::new(Opener::default()));
        let held = orphaned_lock(&second.session.dir);
        let acquire = second.acquire();
        tokio::pin!(acquire);
        assert!(futures::poll!(&mut acquire).is_pending(), "it gave up at once");
        held.release();
        assert!(acquire.await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_lock_whose_holder_died_is_not_waited_for_forever() {
        let share = tempfile::tempdir().unwrap();
        let second = gate(share.path(), &Arc::new(Opener::default()));
        let _held = orphaned_lock(&second.session.dir);
        assert!(matches!(second.acquire().await, Err(NotHeld::Held(_))));
    }

    #[tokio::test(start_paused = true)]
    async fn a_lock_whose_holder_lives_is_not_waited_for() {
        let share = tempfile::tempdir().unwrap();
        let first = gate(share.path(), &Arc::new(Opener::default()));
        let second = gate(share.path(), &Arc::new(Opener::default()));
        first.take_over().await.unwrap();
        let acquire = second.acquire();
        tokio::pin!(acquire);
        assert!(matches!(
            futures::poll!(&mut acquire),
            std::task::Poll::Ready(Err(NotHeld::Held(_)))
        ));
    }

    #[tokio::test]
    async fn a_session_its_holder_deleted_as_empty_is_a_new_one() {
        let share = tempfile::tempdir().unwrap();
        let first = gate(share.path(), &Arc::new(Opener::default()));
        first.take_over().await.unwrap();
        let second = gate(share.path(), &Arc::new(Opener::default()));
        std::fs::remove_dir_all(&first.session.dir).unwrap();
        first.shutdown().await;
        second.take_over().await.unwrap();
        assert!(!second.held().unwrap().resumed);
    }
}
