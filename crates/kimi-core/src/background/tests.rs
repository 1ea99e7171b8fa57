//! Manager tests: real bash tasks in temp session dirs, and a scripted runner for other kinds.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;

use super::manager::TaskError;
use super::store::TaskStore;
use super::*;
use crate::config::BackgroundConfig;
use crate::notifications::{NotificationQueue, Sink};
use crate::procgroup;

const WAIT: Duration = Duration::from_secs(15);

fn config() -> BackgroundConfig {
    BackgroundConfig {
        kill_grace_period_ms: 300,
        wait_poll_interval_ms: 50,
        ..BackgroundConfig::default()
    }
}

struct Session {
    dir: tempfile::TempDir,
    queue: Arc<NotificationQueue>,
    tasks: TaskManager,
}

fn open_with(dir: tempfile::TempDir, config: BackgroundConfig) -> Session {
    let queue = Arc::new(NotificationQueue::open(dir.path()));
    let tasks = TaskManager::open(dir.path(), "session-1", config, Arc::clone(&queue));
    Session { dir, queue, tasks }
}

fn open(config: BackgroundConfig) -> Session {
    open_with(tempfile::tempdir().unwrap(), config)
}

fn bash(command: &str, cwd: &Path) -> BashTaskRequest {
    BashTaskRequest {
        command: command.into(),
        description: "job".into(),
        timeout_s: Some(60),
        tool_call_id: "tc-1".into(),
        shell_name: "bash".into(),
        shell_path: PathBuf::from("bash"),
        cwd: cwd.to_owned(),
        sandbox: crate::sandbox::CommandSandbox::unconfined(),
    }
}

fn read_runtime(dir: &Path, id: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("tasks").join(id).join("runtime.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Whether a process with this pid still runs (zombies count as gone).
fn pid_running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

async fn gone_soon(pid: i32) -> bool {
    for _ in 0..300 {
        if !pid_running(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
async fn a_finished_command_is_recorded_and_announced() {
    let s = open(config());
    let started = s
        .tasks
        .create_bash_task(bash("echo hello; echo oops >&2", s.dir.path()))
        .unwrap();
    let id = started.spec.id.clone();
    assert!(id.starts_with("bash-"), "{id}");
    assert_eq!(started.runtime.status, TaskStatus::Running);
    assert_eq!(started.runtime.worker_pid, Some(std::process::id()));
    assert!(started.runtime.child_pgid.is_some());

    let done = s.tasks.wait(&id, WAIT).await.unwrap();
    assert_eq!(done.runtime.status, TaskStatus::Completed);
    assert_eq!(done.runtime.exit_code, Some(0));
    assert_eq!(
        std::fs::read_to_string(s.tasks.output_path(&id)).unwrap(),
        "hello\noops\n"
    );
    assert_eq!(read_runtime(s.dir.path(), &id)["status"], "completed");

    let pending = s.queue.pending(Sink::Llm, 10);
    assert_eq!(pending.len(), 1);
    let event = &pending[0];
    assert_eq!(
        (event.kind.as_str(), event.source_id.as_str()),
        ("task.completed", id.as_str())
    );
    let text = s.queue.llm_text(event);
    assert!(
        text.ends_with(&format!(
            "<task-notification>\nTask ID: {id}\nTask Type: bash\nDescription: job\nStatus: completed\n\
             Exit code: 0\nOutput tail:\nhello\noops\n</task-notification>\n</notification>"
        )),
        "{text}"
    );
    // The wire sink has its own copy.
    assert_eq!(s.queue.pending(Sink::Wire, 10).len(), 1);
}

#[tokio::test]
async fn a_failing_command_and_a_timeout() {
    let s = open(config());
    let failed = s.tasks.create_bash_task(bash("exit 4", s.dir.path())).unwrap();
    let failed = s.tasks.wait(&failed.spec.id, WAIT).await.unwrap();
    assert_eq!(
        (
            failed.runtime.status,
            failed.runtime.exit_code,
            failed.runtime.failure_reason.as_deref()
        ),
        (
            TaskStatus::Failed,
            Some(4),
            Some("Command failed with exit code 4")
        )
    );

    let slow = s
        .tasks
        .create_bash_task(BashTaskRequest {
            timeout_s: Some(1),
            ..bash("sleep 30", s.dir.path())
        })
        .unwrap();
    let slow = s.tasks.wait(&slow.spec.id, WAIT).await.unwrap();
    assert_eq!(slow.runtime.status, TaskStatus::Failed);
    assert!(slow.runtime.timed_out && slow.runtime.interrupted);
    assert_eq!(
        slow.runtime.failure_reason.as_deref(),
        Some("Command timed out after 1s")
    );
    let kinds: Vec<String> = s
        .queue
        .pending(Sink::Wire, 10)
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, ["task.failed", "task.timed_out"]);
}

#[tokio::test]
async fn kill_stops_the_whole_group_and_is_harmless_on_final_tasks() {
    let s = open(config());
    let pid_file = s.dir.path().join("grandchild.pid");
    let command = format!(
        "bash -c 'trap \"\" TERM; echo $$ > {}; sleep 30' & wait",
        pid_file.display()
    );
    let task = s.tasks.create_bash_task(bash(&command, s.dir.path())).unwrap();
    let id = task.spec.id.clone();
    // Wait for the grandchild to exist; its pid file is our only event.
    let mut grandchild = None;
    for _ in 0..500 {
        if let Ok(text) = std::fs::read_to_string(&pid_file)
            && let Ok(pid) = text.trim().parse::<i32>()
        {
            grandchild = Some(pid);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let grandchild = grandchild.expect("the command never started its grandchild");

    let killed = s.tasks.kill(&id, "Stopped by TaskStop").await.unwrap();
    assert_eq!(killed.runtime.status, TaskStatus::Killed);
    assert!(killed.runtime.interrupted);
    assert_eq!(
        killed.runtime.failure_reason.as_deref(),
        Some("Stopped by TaskStop")
    );
    assert_eq!(killed.control.kill_reason.as_deref(), Some("Stopped by TaskStop"));
    assert!(gone_soon(grandchild).await, "grandchild {grandchild} survived");

    let again = s.tasks.kill(&id, "again").await.unwrap();
    assert_eq!(again, killed);
    let events = s.queue.pending(Sink::Llm, 10);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, "task.killed");
    assert!(matches!(
        s.tasks.kill("bash-nosuchid", "x").await,
        Err(TaskError::NotFound(_))
    ));
}

#[tokio::test]
async fn the_running_task_limit_counts_active_tasks_only() {
    let s = open(BackgroundConfig {
        max_running_tasks: 1,
        ..config()
    });
    let first = s.tasks.create_bash_task(bash("sleep 30", s.dir.path())).unwrap();
    let refused = s.tasks.create_bash_task(bash("true", s.dir.path()));
    assert!(matches!(refused, Err(TaskError::TooMany)));
    assert_eq!(
        refused.unwrap_err().to_string(),
        "Too many background tasks are already running."
    );
    s.tasks.kill(&first.spec.id, "done").await.unwrap();
    let second = s.tasks.create_bash_task(bash("true", s.dir.path())).unwrap();
    s.tasks.wait(&second.spec.id, WAIT).await.unwrap();
    assert_eq!(s.tasks.list(true, None), Vec::new());
    let all: Vec<String> = s.tasks.list(false, None).into_iter().map(|v| v.spec.id).collect();
    assert_eq!(all, [second.spec.id.clone(), first.spec.id.clone()]);
    assert_eq!(s.tasks.list(false, Some(1)).len(), 1);
}

#[tokio::test]
async fn a_subagent_handle_cannot_manage_tasks() {
    let s = open(config());
    let sub = s.tasks.for_subagent();
    assert!(!sub.is_root());
    let refused = sub.create_bash_task(bash("true", s.dir.path()));
    assert_eq!(
        refused.unwrap_err().to_string(),
        "Background tasks are only supported from the root agent."
    );
    assert!(matches!(sub.kill("bash-x", "r").await, Err(TaskError::NotRoot)));
}

#[tokio::test]
async fn a_command_that_cannot_start_fails_its_task() {
    let s = open(config());
    let request = BashTaskRequest {
        shell_path: PathBuf::from("/nonexistent/bash"),
        ..bash("true", s.dir.path())
    };
    let error = s.tasks.create_bash_task(request).unwrap_err();
    assert!(matches!(error, TaskError::Launch(_)), "{error:?}");
    let views = s.tasks.list(false, None);
    assert_eq!(views.len(), 1);
    assert_eq!(views[0].runtime.status, TaskStatus::Failed);
    assert!(
        views[0]
            .runtime
            .failure_reason
            .as_deref()
            .unwrap()
            .starts_with("Failed to launch worker: ")
    );
}

#[tokio::test]
async fn shutdown_stops_tasks_unless_they_are_kept_alive() {
    let s = open(config());
    let task = s.tasks.create_bash_task(bash("sleep 30", s.dir.path())).unwrap();
    let pid = i32::try_from(task.runtime.child_pid.unwrap()).unwrap();
    s.tasks.shutdown().await;
    let ended = s.tasks.get(&task.spec.id).unwrap();
    assert_eq!(ended.runtime.status, TaskStatus::Killed);
    assert_eq!(ended.runtime.failure_reason.as_deref(), Some(SESSION_ENDED));
    assert!(gone_soon(pid).await);

    let kept = open(BackgroundConfig {
        keep_alive_on_exit: true,
        ..config()
    });
    let task = kept
        .tasks
        .create_bash_task(bash("sleep 30", kept.dir.path()))
        .unwrap();
    kept.tasks.shutdown().await;
    let pgid = task.runtime.child_pgid.unwrap();
    assert!(procgroup::is_alive(pgid));
    assert_eq!(
        kept.tasks.get(&task.spec.id).unwrap().runtime.status,
        TaskStatus::Running
    );
    procgroup::signal(pgid, nix::sys::signal::Signal::SIGKILL);
}

#[tokio::test]
async fn reopening_adopts_live_tasks_and_settles_the_rest() {
    let first = open(BackgroundConfig {
        keep_alive_on_exit: true,
        ..config()
    });
    let live = first
        .tasks
        .create_bash_task(bash("sleep 30", first.dir.path()))
        .unwrap();
    let done = first
        .tasks
        .create_bash_task(bash("true", first.dir.path()))
        .unwrap();
    first.tasks.wait(&done.spec.id, WAIT).await.unwrap();
    first
        .queue
        .ack(Sink::Llm, &first.queue.pending(Sink::Llm, 1)[0].id);
    // A task whose process is gone (an earlier agent crashed), as the files would show it.
    let dead = {
        let mut view = first.tasks.get(&done.spec.id).unwrap();
        view.spec.id = "bash-deadbeef".into();
        view.runtime = TaskRuntime {
            status: TaskStatus::Running,
            heartbeat_at: Some(1.0),
            child_pgid: Some(i32::MAX - 7),
            started_at: Some(1.0),
            ..TaskRuntime::new(1.0)
        };
        TaskStore::new(first.dir.path().join("tasks"))
            .create(&view)
            .unwrap();
        view.spec.id
    };
    first.tasks.shutdown().await;
    let Session { dir, .. } = first;

    let second = open_with(dir, config());
    let adopted = second.tasks.get(&live.spec.id).unwrap();
    assert_eq!(adopted.runtime.status, TaskStatus::Running);
    let settled = second.tasks.get(&dead).unwrap();
    assert_eq!(settled.runtime.status, TaskStatus::Lost);
    assert_eq!(
        settled.runtime.failure_reason.as_deref(),
        Some("Background worker heartbeat expired")
    );
    // The finished task was announced before; only the lost one is new for the model.
    let pending: Vec<String> = second
        .queue
        .pending(Sink::Llm, 10)
        .into_iter()
        .map(|e| e.source_id)
        .collect();
    assert_eq!(pending, vec![dead]);

    let pid = i32::try_from(live.runtime.child_pid.unwrap()).unwrap();
    let killed = second
        .tasks
        .kill(&live.spec.id, "Stopped by TaskStop")
        .await
        .unwrap();
    assert_eq!(killed.runtime.status, TaskStatus::Killed);
    assert!(gone_soon(pid).await);
}

#[tokio::test]
async fn other_kinds_run_through_start_task() {
    let s = open(config());
    let (release, released) = tokio::sync::oneshot::channel::<i32>();
    let tasks = s.tasks.clone();
    let view = s
        .tasks
        .start_task(
            NewTask {
                kind: TaskKind::Agent,
                description: "research".into(),
                tool_call_id: "tc-9".into(),
                timeout_s: Some(900),
                kind_payload: serde_json::json!({"agent_id": "a1", "subagent_type": "explore"})
                    .as_object()
                    .cloned(),
            },
            move |id, stop| async move {
                tasks.record(&id, TaskEvent::Start { child_pid: None }).unwrap();
                tokio::select! {
                    code = released => TaskEvent::Exit { exit_code: code.unwrap_or(1) },
                    () = stop.cancelled() => TaskEvent::Kill { reason: "stopped".into(), exit_code: None },
                }
            },
        )
        .unwrap();
    assert!(view.spec.id.starts_with("agent-"));
    assert_eq!(view.runtime.status, TaskStatus::Starting);
    let still = s
        .tasks
        .wait(&view.spec.id, Duration::from_millis(50))
        .await
        .unwrap();
    assert_eq!(still.runtime.status, TaskStatus::Running);
    assert!(format_task(&still, true).contains("agent_id: a1\nsubagent_type: explore"));
    release.send(0).unwrap();
    let done = s.tasks.wait(&view.spec.id, WAIT).await.unwrap();
    assert_eq!(done.runtime.status, TaskStatus::Completed);
    assert!(matches!(s.tasks.record(&view.spec.id, TaskEvent::Resume), Ok(())));
}
