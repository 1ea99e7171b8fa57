//! Lifecycle hooks: user commands from `config.toml` and client subscriptions from `initialize`, run
//! at fixed points of a session (before a tool, when a prompt arrives, when a turn stops, ...), each
//! able to block what is about to happen.
//!
//! Layout:
//! - this file: [`HookEngine`] (matching, parallel execution, the `HookTriggered`/`HookResolved`
//!   events, background triggers) and [`HookDecision`];
//! - [`input`]: the per-event fields a hook is given (one builder per event);
//! - `matcher`: the regex filter; `shell`: command hooks; `wire`: client hooks (`HookRequest`).
//!
//! Reference: `kimi_cli/hooks/`. Every failure fails open: a hook that errs, times out or answers
//! nonsense allows, unless its `on_error = "block"` makes it fail closed. A command hook that cannot
//! start is said so in `HookResolved`'s reason (and the log) even when it allows. A relative program
//! path in a command is resolved against the directory of the configuration file, never the work dir
//! (docs/security.md). The engine does not know what a block means for its caller; the call sites
//! apply it (a tool error, a canned reply, a continuation turn).

pub mod input;
mod matcher;
mod shell;
mod wire;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, FutureExt, join_all};
use kimi_wire::message::{Event, HookAction, HookResolved, HookTriggered};
use kimi_wire::params::WireHookSubscription;
use serde_json::{Map, Value};
use tokio::task::JoinSet;

use crate::config::{HookDef, HookEvent, HookOnError};
use crate::events::EventSink;
use matcher::Matcher;

/// Every hook event, in the reference's order (the order `initialize` reports).
pub const ALL_EVENTS: [HookEvent; 13] = [
    HookEvent::PreToolUse,
    HookEvent::PostToolUse,
    HookEvent::PostToolUseFailure,
    HookEvent::UserPromptSubmit,
    HookEvent::Stop,
    HookEvent::StopFailure,
    HookEvent::SessionStart,
    HookEvent::SessionEnd,
    HookEvent::SubagentStart,
    HookEvent::SubagentStop,
    HookEvent::PreCompact,
    HookEvent::PostCompact,
    HookEvent::Notification,
];

/// The event's name on the wire and in config files.
pub fn event_name(event: HookEvent) -> &'static str {
    match event {
        HookEvent::PreToolUse => "PreToolUse",
        HookEvent::PostToolUse => "PostToolUse",
        HookEvent::PostToolUseFailure => "PostToolUseFailure",
        HookEvent::UserPromptSubmit => "UserPromptSubmit",
        HookEvent::Stop => "Stop",
        HookEvent::StopFailure => "StopFailure",
        HookEvent::SessionStart => "SessionStart",
        HookEvent::SessionEnd => "SessionEnd",
        HookEvent::SubagentStart => "SubagentStart",
        HookEvent::SubagentStop => "SubagentStop",
        HookEvent::PreCompact => "PreCompact",
        HookEvent::PostCompact => "PostCompact",
        HookEvent::Notification => "Notification",
    }
}

/// The event called `name`, if it is one (case-sensitive, as the reference).
pub fn parse_event(name: &str) -> Option<HookEvent> {
    ALL_EVENTS.into_iter().find(|e| event_name(*e) == name)
}

/// What the hooks of one trigger decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookDecision {
    /// No hook matched, or every matching hook allowed (or failed, which allows).
    Allow,
    /// At least one hook blocked.
    Block {
        /// The first blocking hook's reason (command hooks in config order, then client hooks), possibly
        /// empty. `HookResolved` reports it; callers substitute their own text when it is empty.
        reason: String,
        /// Every blocking hook's reason in the same order, `reason` first.
        reasons: Vec<String>,
    },
}

impl HookDecision {
    /// Whether some hook blocked.
    pub fn is_block(&self) -> bool {
        matches!(self, Self::Block { .. })
    }

    /// For `Stop`: the first non-empty reason among the blocking hooks, which becomes the user message
    /// of one more turn. A block without any reason does not continue (reference).
    pub fn stop_continuation(&self) -> Option<&str> {
        match self {
            Self::Allow => None,
            Self::Block { reasons, .. } => reasons.iter().map(String::as_str).find(|r| !r.is_empty()),
        }
    }

    fn from_verdicts(verdicts: Vec<Verdict>) -> Self {
        let reasons: Vec<String> = verdicts
            .into_iter()
            .filter_map(|v| match v {
                Verdict::Allow => None,
                Verdict::Block(reason) => Some(reason),
            })
            .collect();
        match reasons.first() {
            None => Self::Allow,
            Some(first) => Self::Block {
                reason: first.clone(),
                reasons,
            },
        }
    }
}

/// One hook's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Allow,
    Block(String),
}

/// A `[[hooks]]` entry, matcher compiled.
#[derive(Debug)]
struct CommandHook {
    event: HookEvent,
    /// As configured (identical commands run once per trigger).
    command: String,
    /// What runs: `command` with a relative program made absolute, or why it cannot run.
    resolved: Result<String, String>,
    matcher: Matcher,
    timeout: Duration,
    on_error: HookOnError,
}

impl CommandHook {
    /// Runs the hook and turns its outcome into a verdict, with `on_error` applied; the note says
    /// why a hook that could not start allowed.
    async fn run(&self, stdin: &[u8], cwd: &std::path::Path) -> (Verdict, Option<String>) {
        let outcome = match &self.resolved {
            Ok(command) => shell::run(command, stdin, self.timeout, cwd).await,
            Err(why) => {
                tracing::warn!(command = %self.command, why, "hook cannot start");
                shell::Outcome::NotStarted(why.clone())
            }
        };
        let (verdict, failure, not_started) = match outcome {
            shell::Outcome::Decided { verdict, failure } => (verdict, failure, false),
            shell::Outcome::NotStarted(why) => (Verdict::Allow, Some(why), true),
            shell::Outcome::Failed(why) => (Verdict::Allow, Some(why), false),
        };
        let Some(failure) = failure else {
            return (verdict, None);
        };
        let text = if not_started {
            format!("Hook `{}` could not start: {failure}", self.command)
        } else {
            format!("Hook `{}` failed: {failure}", self.command)
        };
        match self.on_error {
            HookOnError::Block => (Verdict::Block(text), None),
            HookOnError::Allow => (verdict, not_started.then_some(text)),
        }
    }
}

/// What `initialize` attached.
#[derive(Debug, Default)]
struct WireSide {
    subscriptions: Vec<wire::Subscription>,
    /// Where `HookTriggered`/`HookResolved` go and `HookRequest`s are sent; `None` before `initialize`
    /// (reference: the callbacks are installed there) and after [`HookEngine::detach_wire`].
    sink: Option<EventSink>,
}

/// Hooks triggered without waiting, owned here so none is truly detached.
#[derive(Debug, Default)]
struct Background {
    tasks: JoinSet<()>,
    closed: bool,
}

/// Runs the hooks of a session. Shared behind an [`Arc`]; every method takes `&self`.
#[derive(Debug)]
pub struct HookEngine {
    work_dir: PathBuf,
    /// `work_dir` as hooks see it in their `cwd` field.
    cwd: String,
    session_id: String,
    commands: Vec<CommandHook>,
    /// A std lock: held only to read or replace the list, never across an `.await`.
    wire: RwLock<WireSide>,
    /// A std lock: held only to spawn into or take the set.
    background: Mutex<Background>,
}

impl HookEngine {
    /// An engine for the command hooks of `config.toml`, run in `work_dir`. A relative program path in
    /// a command cannot run until [`HookEngine::with_config_dir`] says where the configuration lives.
    pub fn new(command_hooks: Vec<HookDef>, work_dir: PathBuf, session_id: String) -> Self {
        let commands = command_hooks
            .into_iter()
            .map(|h| CommandHook {
                event: h.event,
                matcher: Matcher::new(&h.matcher),
                timeout: h.timeout(),
                resolved: shell::resolve_command(&h.command, None),
                command: h.command,
                on_error: h.on_error,
            })
            .collect();
        Self {
            cwd: work_dir.to_string_lossy().into_owned(),
            work_dir,
            session_id,
            commands,
            wire: RwLock::default(),
            background: Mutex::default(),
        }
    }

    /// Resolves relative program paths in the commands against `dir`, the directory of the
    /// configuration file that names them (`None`: the configuration came from no file).
    #[must_use]
    pub fn with_config_dir(mut self, dir: Option<&std::path::Path>) -> Self {
        for hook in &mut self.commands {
            hook.resolved = shell::resolve_command(&hook.command, dir);
        }
        self
    }

    /// Registers the client's subscriptions from `initialize` and starts reporting to `events`:
    /// `HookTriggered`/`HookResolved` events and `HookRequest`s exist only from here on.
    ///
    /// Subscriptions to unknown events are dropped with a warning. As in the reference, a second
    /// `initialize` adds to the earlier subscriptions rather than replacing them.
    pub fn attach_wire(&self, subscriptions: Vec<WireHookSubscription>, events: EventSink) {
        let mut added = Vec::with_capacity(subscriptions.len());
        for s in subscriptions {
            let Some(event) = parse_event(&s.event) else {
                tracing::warn!(event = %s.event, "ignoring unknown hook event from client");
                continue;
            };
            added.push(wire::Subscription {
                id: s.id,
                event,
                matcher: Matcher::new(&s.matcher),
                timeout: Duration::from_secs(s.timeout),
            });
        }
        if !added.is_empty() {
            tracing::info!(
                count = added.len(),
                "registered wire hook subscriptions from client"
            );
        }
        let mut wire = self.wire_mut();
        wire.subscriptions.extend(added);
        wire.sink = Some(events);
    }

    /// Stops reporting to the client (the connection is closing): no more hook events, and client
    /// hooks allow at once instead of waiting for an answer that cannot come.
    pub fn detach_wire(&self) {
        self.wire_mut().sink = None;
    }

    /// How many hooks each event has (command hooks and client subscriptions), for `initialize`'s
    /// `hooks.configured`: events with command hooks first in config order, then the rest in
    /// subscription order; events without hooks are absent.
    pub fn configured_counts(&self) -> Vec<(String, u32)> {
        let mut counts: Vec<(HookEvent, u32)> = Vec::new();
        let mut bump = |event: HookEvent| match counts.iter_mut().find(|(e, _)| *e == event) {
            Some((_, n)) => *n += 1,
            None => counts.push((event, 1)),
        };
        for h in &self.commands {
            bump(h.event);
        }
        for s in &self.wire_ref().subscriptions {
            bump(s.event);
        }
        counts
            .into_iter()
            .map(|(e, n)| (event_name(e).to_owned(), n))
            .collect()
    }

    /// Whether any hook (command or client) is registered for `event`, matching or not. Lets a caller
    /// skip building an expensive input.
    pub fn has_hooks_for(&self, event: HookEvent) -> bool {
        self.commands.iter().any(|h| h.event == event)
            || self.wire_ref().subscriptions.iter().any(|s| s.event == event)
    }

    /// Whether a hook (command or client) of `event` matches `matcher_value`, i.e. whether
    /// [`HookEngine::trigger`] would run or ask anything.
    pub fn has_hooks_matching(&self, event: HookEvent, matcher_value: &str) -> bool {
        self.commands
            .iter()
            .any(|h| h.event == event && h.matcher.is_match(matcher_value))
            || self
                .wire_ref()
                .subscriptions
                .iter()
                .any(|s| s.event == event && s.matcher.is_match(matcher_value))
    }

    /// Runs every hook of `event` whose matcher matches `matcher_value`, all at once, and returns
    /// their joint decision. `input` holds the event's own fields (see [`input`]); the common ones are
    /// added here. Identical commands run once per trigger. When anything matched and the wire is
    /// attached, `HookTriggered` is emitted first and `HookResolved` last.
    ///
    /// Dropping the returned future (a cancelled turn) kills the command hooks it started.
    pub async fn trigger(
        &self,
        event: HookEvent,
        matcher_value: &str,
        input: Map<String, Value>,
    ) -> HookDecision {
        let mut commands: Vec<&CommandHook> = Vec::new();
        for h in self
            .commands
            .iter()
            .filter(|h| h.event == event && h.matcher.is_match(matcher_value))
        {
            if !commands.iter().any(|c| c.command == h.command) {
                commands.push(h);
            }
        }
        let (subscriptions, sink) = {
            let wire = self.wire_ref();
            let matched: Vec<wire::Subscription> = wire
                .subscriptions
                .iter()
                .filter(|s| s.event == event && s.matcher.is_match(matcher_value))
                .cloned()
                .collect();
            (matched, wire.sink.clone())
        };
        let hook_count = commands.len() + subscriptions.len();
        if hook_count == 0 {
            return HookDecision::Allow;
        }

        let name = event_name(event);
        tracing::debug!(
            event = name,
            commands = commands.len(),
            wire = subscriptions.len(),
            "triggering hooks"
        );
        if let Some(sink) = &sink {
            sink.emit(Event::HookTriggered(HookTriggered {
                event: name.to_owned(),
                target: matcher_value.to_owned(),
                hook_count: u32::try_from(hook_count).unwrap_or(u32::MAX),
            }))
            .await;
        }

        let started = Instant::now();
        let payload = input::payload(name, &self.session_id, &self.cwd, input);
        let stdin = input::python_json(&Value::Object(payload.clone()));
        let mut runs: Vec<BoxFuture<'_, (Verdict, Option<String>)>> = Vec::with_capacity(hook_count);
        for h in commands {
            runs.push(h.run(stdin.as_bytes(), &self.work_dir).boxed());
        }
        for s in &subscriptions {
            let ask = wire::Ask {
                subscription_id: &s.id,
                event: name,
                target: matcher_value,
                input: payload.clone(),
                timeout: s.timeout,
            };
            match &sink {
                Some(sink) => runs.push(wire::ask(sink.client(), ask).map(|v| (v, None)).boxed()),
                // Reference: without the wire callback a client hook allows.
                None => runs.push(futures::future::ready((Verdict::Allow, None)).boxed()),
            }
        }
        let (verdicts, notes): (Vec<Verdict>, Vec<Option<String>>) = join_all(runs).await.into_iter().unzip();
        let note = notes.into_iter().flatten().next().unwrap_or_default();
        let decision = HookDecision::from_verdicts(verdicts);
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);

        let (action, reason) = match &decision {
            // Allowed, but a hook that could not start is said so.
            HookDecision::Allow => (HookAction::Allow, note),
            HookDecision::Block { reason, .. } => {
                tracing::warn!(event = name, matcher = matcher_value, reason, "hook blocked");
                (HookAction::Block, reason.clone())
            }
        };
        if let Some(sink) = &sink {
            sink.emit(Event::HookResolved(HookResolved {
                event: name.to_owned(),
                target: matcher_value.to_owned(),
                action,
                reason,
                duration_ms,
            }))
            .await;
        }
        decision
    }

    /// Triggers `event` in the background and returns at once; for the events whose outcome nobody
    /// waits for (`PostToolUse`, `PostToolUseFailure`, `StopFailure`, `SubagentStop`, `PostCompact`,
    /// `Notification`). The task is owned by the engine until it ends or [`HookEngine::shutdown`] runs;
    /// after shutdown this does nothing. Must be called from within the Tokio runtime.
    pub fn trigger_detached(
        self: &Arc<Self>,
        event: HookEvent,
        matcher_value: String,
        input: Map<String, Value>,
    ) {
        if !self.has_hooks_for(event) {
            return;
        }
        let engine = Arc::clone(self);
        let mut background = crate::sync::lock(&self.background);
        if background.closed {
            tracing::debug!(
                event = event_name(event),
                "hook engine shut down; background trigger dropped"
            );
            return;
        }
        // Reap finished triggers so the set stays small over a long session.
        while background.tasks.try_join_next().is_some() {}
        background.tasks.spawn(async move {
            engine.trigger(event, &matcher_value, input).await;
        });
    }

    /// Waits up to `grace` for background triggers, then aborts the rest (which kills their command
    /// hooks). Later background triggers are dropped; awaited triggers still work.
    pub async fn shutdown(&self, grace: Duration) {
        let mut tasks = {
            let mut background = crate::sync::lock(&self.background);
            background.closed = true;
            std::mem::take(&mut background.tasks)
        };
        let drained = tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!(
                remaining = tasks.len(),
                "background hooks did not finish in time; aborting them"
            );
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
    }

    fn wire_ref(&self) -> std::sync::RwLockReadGuard<'_, WireSide> {
        // The lock guards plain data replaced whole; a poisoned one is still consistent.
        crate::sync::read(&self.wire)
    }

    fn wire_mut(&self) -> std::sync::RwLockWriteGuard<'_, WireSide> {
        crate::sync::write(&self.wire)
    }
}

#[cfg(test)]
mod tests;
