//! [`TaskManager`]: the session's background tasks, their supervisors and their files.
//!
//! Every task lives in memory (the source of truth while the agent runs) and is written through to
//! `<session>/tasks/<id>/` on each change. Each running task has a supervisor, a tokio task owned by the
//! manager's tracker, holding a stop token; its status is broadcast on a watch channel so waiting
//! (`TaskOutput` with `block`) needs no polling. When a task reaches a final status the manager
//! publishes its notification to the session's [`NotificationQueue`], which the agent loop delivers.
//!
//! Opening the manager recovers tasks an earlier process left unfinished: a bash task whose process
//! group still runs (checked against its recorded start time, so a reused process id is not mistaken
//! for it) is adopted and watched; any other is marked `lost` (or `killed` if a stop had been asked
//! for), with the reference's reasons.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::bash::{self, BashCommand, BashEnd};
use super::ids::{is_valid_task_id, new_task_id};
use super::model::TaskStatus;
use super::model::{OwnerRole, TaskConsumerState, TaskControl, TaskKind, TaskRuntime, TaskSpec, TaskView};
use super::notify::{SOURCE_KIND, task_notification_lines, terminal_notification};
use super::status::{Applied, IllegalTransition, TaskEvent};
use super::store::{OutputChunk, TaskStore};
use crate::config::BackgroundConfig;
use crate::notifications::{Category, NotificationDetails, NotificationEvent, NotificationQueue, unix_now};
use crate::procgroup::{self, GroupGuard};
use crate::sandbox::CommandSandbox;
use crate::session::SessionError;

/// The reason recorded for tasks stopped because the session ended (reference text).
pub const SESSION_ENDED: &str = "CLI session ended";

/// How much longer than the kill grace period a stop may take before we stop waiting for it: the
/// exit status still has to be collected and recorded after SIGKILL.
const STOP_MARGIN: Duration = Duration::from_secs(3);

/// Why a task operation failed; the messages are the reference's.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// Only the root agent manages tasks.
    #[error("Background tasks are only supported from the root agent.")]
    NotRoot,
    /// `background.max_running_tasks` tasks are already active.
    #[error("Too many background tasks are already running.")]
    TooMany,
    /// No task has this id.
    #[error("Task not found: {0}")]
    NotFound(String),
    /// The command could not be started.
    #[error("{0}")]
    Launch(std::io::Error),
    /// The task's files could not be written.
    #[error(transparent)]
    Store(#[from] SessionError),
    /// A caller reported an event the task's status does not allow.
    #[error(transparent)]
    Illegal(#[from] IllegalTransition),
}

/// A shell command to run as a background task.
#[derive(Debug, Clone)]
pub struct BashTaskRequest {
    /// The command line, passed to `-c`.
    pub command: String,
    /// The model's few words about it.
    pub description: String,
    /// Seconds it may run; `None` for no limit (the kimi-code `Bash` with `disable_timeout`).
    pub timeout_s: Option<u64>,
    /// The tool call that starts it.
    pub tool_call_id: String,
    /// `bash` (or `sh`).
    pub shell_name: String,
    /// The shell binary.
    pub shell_path: PathBuf,
    /// The working directory.
    pub cwd: PathBuf,
    /// How the command is confined.
    pub sandbox: CommandSandbox,
}

/// A task of a kind other than bash, for [`TaskManager::start_task`].
#[derive(Debug, Clone)]
pub struct NewTask {
    /// Its kind (and id prefix).
    pub kind: TaskKind,
    /// The model's few words about it.
    pub description: String,
    /// The tool call that starts it.
    pub tool_call_id: String,
    /// Seconds it may run, as recorded in its spec (enforcing it is the runner's job).
    pub timeout_s: Option<u64>,
    /// Kind-specific data (agent tasks: `agent_id`, `subagent_type`, `prompt`, `model_override`,
    /// `launch_mode`).
    pub kind_payload: Option<Map<String, Value>>,
}

/// A handle to the session's background tasks; clones share them. A handle made for a subagent
/// ([`TaskManager::for_subagent`]) may read but not start or stop tasks, as in the reference.
#[derive(Debug, Clone)]
pub struct TaskManager {
    inner: Arc<Inner>,
    role: OwnerRole,
}

#[derive(Debug)]
struct Inner {
    session_id: String,
    config: BackgroundConfig,
    store: TaskStore,
    notifications: Arc<NotificationQueue>,
    /// By id. A std mutex: no section awaits; the small record writes inside keep each task's files in
    /// the order of its changes.
    tasks: Mutex<BTreeMap<String, Entry>>,
    /// Every supervisor; [`TaskManager::shutdown`] waits for them.
    supervisors: TaskTracker,
    /// Fired when the agent exits leaving tasks running: supervisors let go without stopping them.
    detach: CancellationToken,
}

#[derive(Debug)]
struct Entry {
    view: TaskView,
    status: watch::Sender<TaskStatus>,
    /// Asks the supervisor to stop the task; `None` once it is final.
    stop: Option<CancellationToken>,
}

impl Entry {
    fn new(view: TaskView, stop: Option<CancellationToken>) -> Self {
        let (status, _) = watch::channel(view.runtime.status);
        Self { view, status, stop }
    }
}

impl TaskManager {
    /// The tasks of the session in `session_dir`, recovering what an earlier process left running.
    /// Must be called within a tokio runtime (adopted tasks get a watcher).
    pub fn open(
        session_dir: &Path,
        session_id: &str,
        config: BackgroundConfig,
        notifications: Arc<NotificationQueue>,
    ) -> Self {
        let inner = Arc::new(Inner {
            session_id: session_id.to_owned(),
            config,
            store: TaskStore::new(session_dir.join("tasks")),
            notifications,
            tasks: Mutex::new(BTreeMap::new()),
            supervisors: TaskTracker::new(),
            detach: CancellationToken::new(),
        });
        inner.notifications.set_details(
            SOURCE_KIND,
            Arc::new(TaskDetails {
                inner: Arc::downgrade(&inner),
            }),
        );
        inner.recover();
        Self {
            inner,
            role: OwnerRole::Root,
        }
    }

    /// The same tasks, as a subagent sees them: starting, stopping and reading are refused.
    #[must_use]
    pub fn for_subagent(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            role: OwnerRole::Subagent,
        }
    }

    /// Whether this handle belongs to the root agent.
    pub fn is_root(&self) -> bool {
        self.role == OwnerRole::Root
    }

    /// The `[background]` configuration.
    pub fn config(&self) -> &BackgroundConfig {
        &self.inner.config
    }

    /// Starts `request` as a bash task and returns it (running).
    pub fn create_bash_task(&self, request: BashTaskRequest) -> Result<TaskView, TaskError> {
        self.ensure_root()?;
        let mut spec = self
            .inner
            .new_spec(TaskKind::Bash, &request.description, &request.tool_call_id);
        spec.command = Some(request.command.clone());
        spec.shell_name = Some(request.shell_name.clone());
        spec.shell_path = Some(request.shell_path.to_string_lossy().into_owned());
        spec.cwd = Some(request.cwd.to_string_lossy().into_owned());
        spec.timeout_s = request.timeout_s;
        let inner = &self.inner;
        let mut tasks = inner.lock();
        let (id, stop) = inner.register(&mut tasks, spec)?;
        inner.apply_locked(
            &mut tasks,
            &id,
            TaskEvent::Launch {
                worker_pid: std::process::id(),
            },
        )?;
        let output = inner.store.output_path(&id);
        if !inner.config.keep_alive_on_exit {
            crate::guardian::start();
        }
        let spawned = bash::spawn(BashCommand {
            shell: &request.shell_path,
            command: &request.command,
            cwd: &request.cwd,
            output: &output,
            sandbox: &request.sandbox,
        });
        let child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let reason = format!("Failed to launch worker: {e}");
                inner.apply_locked(&mut tasks, &id, TaskEvent::Fail { reason })?;
                return Err(TaskError::Launch(e));
            }
        };
        let pid = child.id();
        inner.apply_locked(&mut tasks, &id, TaskEvent::Start { child_pid: pid })?;
        let view = tasks
            .get(&id)
            .map(|e| e.view.clone())
            .ok_or_else(|| TaskError::NotFound(id.clone()))?;
        drop(tasks);
        let pgid = pid.and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
        let timeout = request.timeout_s.map(Duration::from_secs);
        let grace = inner.config.kill_grace_period();
        // A task meant to die with us has the one child guard: registered with the guardian (which kills
        // its group if we are SIGKILLed) and killed if its supervisor is dropped unfinished. A task kept
        // alive on exit is left to the next agent instead, so it has none.
        let guard = match pid {
            Some(pid) if pgid > 0 && !inner.config.keep_alive_on_exit => Some(GroupGuard::watch(pid)),
            _ => None,
        };
        let supervisor = Arc::clone(inner);
        inner.supervisors.spawn(async move {
            let detach = supervisor.detach.clone();
            let end = bash::supervise(child, pgid, timeout, grace, &stop, &detach).await;
            // Supervised to its end (exited, or stopped with TERM, grace, KILL): what the command left
            // running in its group after exiting is left alone, as before.
            if let Some(guard) = guard {
                guard.disarm();
            }
            supervisor.finish_bash(&id, end, timeout);
        });
        Ok(view)
    }

    /// Starts a task of another kind (a background agent). `run` gets the task's id and stop token,
    /// does the work (reporting progress with [`TaskManager::record`]) and returns the event that ends
    /// the task; it should return promptly once the token fires, with a [`TaskEvent::Kill`].
    pub fn start_task<F, Fut>(&self, new: NewTask, run: F) -> Result<TaskView, TaskError>
    where
        F: FnOnce(String, CancellationToken) -> Fut,
        Fut: std::future::Future<Output = TaskEvent> + Send + 'static,
    {
        self.ensure_root()?;
        let inner = &self.inner;
        let mut spec = inner.new_spec(new.kind, &new.description, &new.tool_call_id);
        spec.timeout_s = new.timeout_s;
        spec.kind_payload = new.kind_payload;
        let mut tasks = inner.lock();
        let (id, stop) = inner.register(&mut tasks, spec)?;
        inner.apply_locked(
            &mut tasks,
            &id,
            TaskEvent::Launch {
                worker_pid: std::process::id(),
            },
        )?;
        let view = tasks
            .get(&id)
            .map(|e| e.view.clone())
            .ok_or_else(|| TaskError::NotFound(id.clone()))?;
        drop(tasks);
        let work = run(id.clone(), stop);
        let supervisor = Arc::clone(inner);
        inner.supervisors.spawn(async move {
            let end = work.await;
            if let Err(e) = supervisor.record(&id, end) {
                tracing::error!(task = %id, error = %e, "task end not recorded");
            }
        });
        Ok(view)
    }

    /// Tasks, most recently changed first: only the active ones when `active_only`, at most `limit`.
    pub fn list(&self, active_only: bool, limit: Option<usize>) -> Vec<TaskView> {
        let mut views: Vec<TaskView> = self
            .inner
            .lock()
            .values()
            .filter(|e| !active_only || !e.view.runtime.status.is_terminal())
            .map(|e| e.view.clone())
            .collect();
        let recency = |v: &TaskView| {
            if v.runtime.updated_at > 0.0 {
                v.runtime.updated_at
            } else {
                v.spec.created_at
            }
        };
        views.sort_by(|a, b| recency(b).total_cmp(&recency(a)));
        if let Some(limit) = limit {
            views.truncate(limit);
        }
        views
    }

    /// The task `id`, if there is one.
    pub fn get(&self, id: &str) -> Option<TaskView> {
        self.inner.get(id)
    }

    /// Where the task's whole output is.
    pub fn output_path(&self, id: &str) -> PathBuf {
        self.inner.store.output_path(id)
    }

    /// Up to `max_bytes` of the task's output from `offset`.
    pub fn read_output(&self, id: &str, offset: u64, max_bytes: u64) -> std::io::Result<OutputChunk> {
        self.inner.store.read_output(id, offset, max_bytes)
    }

    /// Records that the model has seen the output up to `output_size` bytes (`consumer.json`).
    pub fn mark_viewed(&self, id: &str, output_size: u64) {
        let mut tasks = self.inner.lock();
        let Some(entry) = tasks.get_mut(id) else { return };
        entry.view.consumer = TaskConsumerState {
            last_seen_output_size: output_size,
            last_viewed_at: Some(unix_now()),
        };
        if let Err(e) = self.inner.store.write_consumer(id, &entry.view.consumer) {
            tracing::warn!(task = id, error = %e, "task consumer state not written");
        }
    }

    /// Waits up to `timeout` for the task to reach a final status and returns it as it then is.
    pub async fn wait(&self, id: &str, timeout: Duration) -> Option<TaskView> {
        let mut status = self.inner.lock().get(id)?.status.subscribe();
        let _ = tokio::time::timeout(timeout, status.wait_for(|s| s.is_terminal())).await;
        self.get(id)
    }

    /// Stops task `id` (a final task is left as it is) and returns it once stopped, or as it is when the
    /// stop takes longer than the kill grace period allows.
    pub async fn kill(&self, id: &str, reason: &str) -> Result<TaskView, TaskError> {
        self.ensure_root()?;
        self.inner.stop(id, reason).await
    }

    /// Ends the session's tasks: each active one is stopped with the reason `CLI session ended` and
    /// awaited, unless `background.keep_alive_on_exit` keeps them running after we exit.
    pub async fn shutdown(&self) {
        let views = self.list(true, None);
        let active: Vec<String> = views.iter().map(|v| v.spec.id.clone()).collect();
        if self.inner.config.keep_alive_on_exit {
            // Only shell tasks can outlive us: an agent task runs inside this process.
            let agents: Vec<&String> = views
                .iter()
                .filter(|v| v.spec.kind == TaskKind::Agent)
                .map(|v| &v.spec.id)
                .collect();
            futures::future::join_all(agents.iter().map(|id| self.inner.stop(id, SESSION_ENDED))).await;
            if !active.is_empty() {
                tracing::info!(tasks = ?active, "background shell tasks kept running after exit");
            }
            // They stay `running` on disk; the next agent to open the session adopts them.
            self.inner.detach.cancel();
        } else {
            if !active.is_empty() {
                tracing::info!(tasks = ?active, "stopping background tasks at exit");
            }
            futures::future::join_all(active.iter().map(|id| self.inner.stop(id, SESSION_ENDED))).await;
        }
        self.inner.supervisors.close();
        let limit = self.inner.config.kill_grace_period() + STOP_MARGIN;
        if tokio::time::timeout(limit, self.inner.supervisors.wait())
            .await
            .is_err()
        {
            tracing::warn!("background task supervisors did not finish in time");
        }
    }

    /// Records `event` for task `id` (for supervisors of other task kinds, such as background agents).
    pub fn record(&self, id: &str, event: TaskEvent) -> Result<(), TaskError> {
        self.inner.record(id, event)
    }

    fn ensure_root(&self) -> Result<(), TaskError> {
        if self.is_root() {
            Ok(())
        } else {
            Err(TaskError::NotRoot)
        }
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        crate::sync::lock(&self.tasks)
    }

    fn get(&self, id: &str) -> Option<TaskView> {
        self.lock().get(id).map(|e| e.view.clone())
    }

    fn new_spec(&self, kind: TaskKind, description: &str, tool_call_id: &str) -> TaskSpec {
        TaskSpec {
            version: 1,
            id: String::new(),
            kind,
            session_id: self.session_id.clone(),
            description: description.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
            owner_role: OwnerRole::Root,
            created_at: unix_now(),
            command: None,
            shell_name: None,
            shell_path: None,
            cwd: None,
            timeout_s: None,
            kind_payload: None,
        }
    }

    /// Checks the running-task limit, gives `spec` a fresh id and writes the new task's files.
    fn register(
        &self,
        tasks: &mut BTreeMap<String, Entry>,
        mut spec: TaskSpec,
    ) -> Result<(String, CancellationToken), TaskError> {
        let active = tasks
            .values()
            .filter(|e| !e.view.runtime.status.is_terminal())
            .count();
        if active as u64 >= self.config.max_running_tasks {
            return Err(TaskError::TooMany);
        }
        let id = loop {
            let id = new_task_id(spec.kind);
            if !tasks.contains_key(&id) && !self.store.task_dir(&id).exists() {
                break id;
            }
        };
        spec.id.clone_from(&id);
        let view = TaskView {
            runtime: TaskRuntime::new(spec.created_at),
            spec,
            control: TaskControl::default(),
            consumer: TaskConsumerState::default(),
        };
        self.store.create(&view)?;
        let stop = CancellationToken::new();
        tasks.insert(id.clone(), Entry::new(view, Some(stop.clone())));
        Ok((id, stop))
    }

    /// Applies `event` and writes the runtime record; when the task just reached a final status, its
    /// notification is published first, so whoever sees the end (TaskOutput with `block`, a reader of
    /// `runtime.json`) finds the notification already queued for the next step.
    fn apply_locked(
        &self,
        tasks: &mut BTreeMap<String, Entry>,
        id: &str,
        event: TaskEvent,
    ) -> Result<(), TaskError> {
        let entry = tasks
            .get_mut(id)
            .ok_or_else(|| TaskError::NotFound(id.to_owned()))?;
        let Applied::Changed(status) = entry.view.runtime.apply(event, unix_now())? else {
            return Ok(());
        };
        // The notification is queued before anyone can see the end (in `runtime.json` or by waiting),
        // so whatever follows the end hears of it.
        if status.is_terminal() {
            entry.stop = None;
            if let Some(notice) = terminal_notification(&entry.view) {
                self.notifications.publish(notice);
            }
        }
        if let Err(e) = self.store.write_runtime(id, &entry.view.runtime) {
            tracing::error!(task = id, error = %e, "task runtime not written");
        }
        entry.status.send_replace(status);
        Ok(())
    }

    /// Applies `event` to task `id`.
    fn record(&self, id: &str, event: TaskEvent) -> Result<(), TaskError> {
        self.apply_locked(&mut self.lock(), id, event)
    }

    /// Records how a supervised bash command ended.
    fn finish_bash(&self, id: &str, end: BashEnd, timeout: Option<Duration>) {
        let mut tasks = self.lock();
        let kill_reason = tasks
            .get(id)
            .and_then(|e| {
                e.view
                    .control
                    .kill_requested_at
                    .map(|_| e.view.control.kill_reason.clone())
            })
            .map(|reason| reason.unwrap_or_else(|| "Killed".to_owned()));
        let event = match (end, kill_reason) {
            (BashEnd::TimedOut(exit_code), _) => TaskEvent::TimeOut {
                reason: format!(
                    "Command timed out after {}s",
                    timeout.unwrap_or_default().as_secs()
                ),
                exit_code,
            },
            (BashEnd::Exited(code), Some(reason)) => TaskEvent::Kill {
                reason,
                exit_code: Some(code),
            },
            (BashEnd::Stopped(exit_code), reason) => TaskEvent::Kill {
                reason: reason.unwrap_or_else(|| "Killed".to_owned()),
                exit_code,
            },
            (BashEnd::Exited(exit_code), None) => TaskEvent::Exit { exit_code },
            (BashEnd::Detached, _) => return,
        };
        if let Err(e) = self.apply_locked(&mut tasks, id, event) {
            tracing::error!(task = id, error = %e, "task end not recorded");
        }
    }

    /// Records the stop request, asks the supervisor to stop the task and waits for it to end.
    async fn stop(&self, id: &str, reason: &str) -> Result<TaskView, TaskError> {
        let (stop, mut status) = {
            let mut tasks = self.lock();
            let entry = tasks
                .get_mut(id)
                .ok_or_else(|| TaskError::NotFound(id.to_owned()))?;
            if entry.view.runtime.status.is_terminal() {
                return Ok(entry.view.clone());
            }
            entry.view.control = TaskControl {
                kill_requested_at: Some(unix_now()),
                kill_reason: Some(reason.to_owned()),
                force: false,
            };
            self.store.write_control(id, &entry.view.control)?;
            (entry.stop.clone(), entry.status.subscribe())
        };
        match stop {
            Some(stop) => stop.cancel(),
            // Nobody supervises it (cannot happen for tasks we started): record the stop ourselves.
            None => self.record(
                id,
                TaskEvent::Kill {
                    reason: reason.to_owned(),
                    exit_code: None,
                },
            )?,
        }
        let limit = self.config.kill_grace_period() + STOP_MARGIN;
        if tokio::time::timeout(limit, status.wait_for(|s| s.is_terminal()))
            .await
            .is_err()
        {
            tracing::warn!(task = id, "background task still stopping");
        }
        self.get(id).ok_or_else(|| TaskError::NotFound(id.to_owned()))
    }

    /// Loads the stored tasks, settles or adopts the unfinished ones, and publishes the notifications
    /// of final tasks that have none yet.
    fn recover(self: &Arc<Self>) {
        let mut views = self.store.load_all();
        views.sort_by(|a, b| a.spec.created_at.total_cmp(&b.spec.created_at));
        let mut tasks = self.lock();
        for view in views {
            let id = view.spec.id.clone();
            let unfinished = !view.runtime.status.is_terminal();
            let adopted = unfinished.then(|| adoptable_group(&view)).flatten();
            let settle = (unfinished && adopted.is_none()).then(|| settle_event(&view));
            let stop = adopted.map(|_| CancellationToken::new());
            tasks.insert(id.clone(), Entry::new(view, stop.clone()));
            if let Some(event) = settle
                && let Err(e) = self.apply_locked(&mut tasks, &id, event)
            {
                tracing::error!(task = %id, error = %e, "unfinished task not settled");
            }
            if let (Some(pgid), Some(stop)) = (adopted, stop) {
                tracing::info!(task = %id, pgid, "adopting a background task that is still running");
                let inner = Arc::clone(self);
                self.supervisors
                    .spawn(async move { inner.watch_adopted(&id, pgid, &stop).await });
            }
        }
        // Tasks that ended while no agent could announce them.
        let mut finished: Vec<&TaskView> = tasks
            .values()
            .map(|e| &e.view)
            .filter(|v| v.runtime.status.is_terminal())
            .collect();
        finished.sort_by(|a, b| {
            let end = |v: &TaskView| v.runtime.finished_at.unwrap_or(v.runtime.updated_at);
            end(a).total_cmp(&end(b))
        });
        for notice in finished.into_iter().filter_map(terminal_notification) {
            self.notifications.publish(notice);
        }
    }

    /// Watches an adopted task's process group until it is gone or a stop is asked for.
    async fn watch_adopted(&self, id: &str, pgid: i32, stop: &CancellationToken) {
        let poll = Duration::from_millis(self.config.wait_poll_interval_ms.max(50));
        let stopped = loop {
            if !procgroup::is_alive(pgid) {
                break false;
            }
            tokio::select! {
                () = stop.cancelled() => {
                    procgroup::terminate(pgid, self.config.kill_grace_period(), || {}).await;
                    break true;
                }
                () = self.detach.cancelled() => return,
                () = tokio::time::sleep(poll) => {}
            }
        };
        let mut tasks = self.lock();
        let Some(entry) = tasks.get(id) else { return };
        let control = entry.view.control.clone();
        let event = match (stopped, control.kill_requested_at) {
            (true, _) | (false, Some(_)) => TaskEvent::Kill {
                reason: control.kill_reason.unwrap_or_else(|| "Killed".to_owned()),
                exit_code: None,
            },
            (false, None) => TaskEvent::Lose {
                reason: "The task ended while no agent supervised it; its exit code is unknown".to_owned(),
            },
        };
        if let Err(e) = self.apply_locked(&mut tasks, id, event) {
            tracing::error!(task = id, error = %e, "adopted task end not recorded");
        }
    }
}

/// The process group of an unfinished bash task that still runs the task's own command, judged by the
/// group leader's start time against the recorded one.
fn adoptable_group(view: &TaskView) -> Option<i32> {
    /// Recorded start and the process's own start differ by spawn time and clock-tick rounding.
    const START_TOLERANCE_S: f64 = 3.0;
    if view.spec.kind != TaskKind::Bash {
        return None;
    }
    let pgid = view.runtime.child_pgid.filter(|p| *p > 0)?;
    let recorded = view.runtime.started_at?;
    let actual = procgroup::started_at(pgid)?;
    ((actual - recorded).abs() <= START_TOLERANCE_S && procgroup::is_alive(pgid)).then_some(pgid)
}

/// How an unfinished task nobody runs any more is settled (reference `recover`).
fn settle_event(view: &TaskView) -> TaskEvent {
    if view.spec.kind == TaskKind::Agent {
        return TaskEvent::Lose {
            reason: "In-process background agent is no longer running".to_owned(),
        };
    }
    if view.control.kill_requested_at.is_some() {
        return TaskEvent::Kill {
            reason: view
                .control
                .kill_reason
                .clone()
                .unwrap_or_else(|| "Killed during recovery".to_owned()),
            exit_code: None,
        };
    }
    TaskEvent::Lose {
        reason: if view.runtime.heartbeat_at.is_none() {
            "Background worker never heartbeat after startup".to_owned()
        } else {
            "Background worker heartbeat expired".to_owned()
        },
    }
}

/// Adds a task's state and output tail to the model's copy of its notifications.
#[derive(Debug)]
struct TaskDetails {
    inner: Weak<Inner>,
}

impl NotificationDetails for TaskDetails {
    fn llm_lines(&self, event: &NotificationEvent) -> Vec<String> {
        if event.category != Category::Task || !is_valid_task_id(&event.source_id) {
            return Vec::new();
        }
        let Some(inner) = self.inner.upgrade() else {
            return Vec::new();
        };
        let Some(view) = inner.get(&event.source_id) else {
            return Vec::new();
        };
        let config = &inner.config;
        let tail = inner.store.tail_output(
            &view.spec.id,
            config.notification_tail_chars,
            usize::try_from(config.notification_tail_lines).unwrap_or(usize::MAX),
        );
        task_notification_lines(&view, &tail)
    }
}
