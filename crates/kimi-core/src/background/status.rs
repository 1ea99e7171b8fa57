//! The rules for changing a task's status ([`TaskStatus`]).
//!
//! ```text
//! created ──launch──▶ starting ──start──▶ running ◀──resume── awaiting_approval
//!    │                    │                  │  └──await_approval──▶──┘
//!    └────────────────────┴──────────────────┴──▶ completed | failed | killed | lost   (final)
//! ```
//!
//! A final status never changes again: a stop request racing with the command's own exit is settled by
//! whichever is recorded first, as in the reference (its `_mark_task_*` skip terminal tasks). Every
//! change goes through [`TaskRuntime::apply`], which also fills in the fields the reference sets with
//! each status (`finished_at`, `exit_code`, `interrupted`, `timed_out`, `failure_reason`).

use super::model::{TaskRuntime, TaskStatus};

/// Something that happened to a task.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskEvent {
    /// Its supervisor is starting it.
    Launch {
        /// The supervising process.
        worker_pid: u32,
    },
    /// Its work began (for a bash task, the shell was spawned).
    Start {
        /// The shell's pid, for bash tasks.
        child_pid: Option<u32>,
    },
    /// A background agent waits for an approval.
    AwaitApproval {
        /// What it waits for.
        reason: String,
    },
    /// Approval came; it runs again.
    Resume,
    /// It ended by itself with `exit_code` (0 is success; agents report 0 or 1).
    Exit {
        /// The exit code, minus the signal number for a signal.
        exit_code: i32,
    },
    /// Its timeout passed and it was stopped.
    TimeOut {
        /// The reference's text, e.g. `Command timed out after 60s`.
        reason: String,
        /// The exit code after the stop, when known.
        exit_code: Option<i32>,
    },
    /// It was stopped on request.
    Kill {
        /// The recorded reason.
        reason: String,
        /// The exit code after the stop, when known.
        exit_code: Option<i32>,
    },
    /// It could not run or broke down.
    Fail {
        /// Why.
        reason: String,
    },
    /// Nobody supervises it any more.
    Lose {
        /// Why we think so.
        reason: String,
    },
}

/// What [`TaskRuntime::apply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The record changed to the given status.
    Changed(TaskStatus),
    /// The task had already reached a final status; nothing changed.
    AlreadyFinal(TaskStatus),
}

/// An event that cannot happen in the task's current status (a bug in the caller).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a {from} task cannot {event}")]
pub struct IllegalTransition {
    /// The status the task was in.
    pub from: TaskStatus,
    /// The event's name.
    pub event: &'static str,
}

impl TaskEvent {
    fn name(&self) -> &'static str {
        match self {
            Self::Launch { .. } => "launch",
            Self::Start { .. } => "start",
            Self::AwaitApproval { .. } => "await approval",
            Self::Resume => "resume",
            Self::Exit { .. } => "exit",
            Self::TimeOut { .. } => "time out",
            Self::Kill { .. } => "be killed",
            Self::Fail { .. } => "fail",
            Self::Lose { .. } => "be lost",
        }
    }

    /// The status this event leads to from `from`, if it may happen there.
    fn target(&self, from: TaskStatus) -> Option<TaskStatus> {
        use TaskStatus as S;
        match (self, from) {
            (Self::Launch { .. }, S::Created) => Some(S::Starting),
            (Self::Start { .. }, S::Created | S::Starting) => Some(S::Running),
            (Self::AwaitApproval { .. }, S::Starting | S::Running) => Some(S::AwaitingApproval),
            (Self::Resume, S::AwaitingApproval) => Some(S::Running),
            (Self::Exit { exit_code: 0 }, _) => Some(S::Completed),
            (Self::Exit { .. } | Self::TimeOut { .. } | Self::Fail { .. }, _) => Some(S::Failed),
            (Self::Kill { .. }, _) => Some(S::Killed),
            (Self::Lose { .. }, _) => Some(S::Lost),
            (Self::Launch { .. } | Self::Start { .. } | Self::AwaitApproval { .. } | Self::Resume, _) => None,
        }
    }
}

impl TaskRuntime {
    /// Applies `event` at time `now` (seconds since the Unix epoch).
    pub fn apply(&mut self, event: TaskEvent, now: f64) -> Result<Applied, IllegalTransition> {
        if self.status.is_terminal() {
            return Ok(Applied::AlreadyFinal(self.status));
        }
        let Some(next) = event.target(self.status) else {
            return Err(IllegalTransition {
                from: self.status,
                event: event.name(),
            });
        };
        self.status = next;
        self.updated_at = now;
        if next.is_terminal() {
            self.finished_at = Some(now);
            self.heartbeat_at = Some(now);
        }
        match event {
            TaskEvent::Launch { worker_pid } => {
                self.worker_pid = Some(worker_pid);
                self.started_at = Some(now);
                self.heartbeat_at = Some(now);
            }
            TaskEvent::Start { child_pid } => {
                self.child_pid = child_pid;
                // A process started with its own group leads it: the group id is its pid.
                self.child_pgid = child_pid.and_then(|pid| i32::try_from(pid).ok());
                self.started_at.get_or_insert(now);
                self.heartbeat_at = Some(now);
                self.failure_reason = None;
            }
            TaskEvent::AwaitApproval { reason } => self.failure_reason = Some(reason),
            TaskEvent::Resume => self.failure_reason = None,
            TaskEvent::Exit { exit_code } => {
                self.exit_code = Some(exit_code);
                self.failure_reason =
                    (exit_code != 0).then(|| format!("Command failed with exit code {exit_code}"));
            }
            TaskEvent::TimeOut { reason, exit_code } => {
                self.exit_code = exit_code.or(self.exit_code);
                self.interrupted = true;
                self.timed_out = true;
                self.failure_reason = Some(reason);
            }
            TaskEvent::Kill { reason, exit_code } => {
                self.exit_code = exit_code.or(self.exit_code);
                self.interrupted = true;
                self.failure_reason = Some(reason);
            }
            TaskEvent::Fail { reason } | TaskEvent::Lose { reason } => self.failure_reason = Some(reason),
        }
        Ok(Applied::Changed(next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const ALL: [TaskStatus; 8] = [
        TaskStatus::Created,
        TaskStatus::Starting,
        TaskStatus::Running,
        TaskStatus::AwaitingApproval,
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Killed,
        TaskStatus::Lost,
    ];

    fn events() -> Vec<TaskEvent> {
        vec![
            TaskEvent::Launch { worker_pid: 7 },
            TaskEvent::Start { child_pid: Some(9) },
            TaskEvent::AwaitApproval { reason: "r".into() },
            TaskEvent::Resume,
            TaskEvent::Exit { exit_code: 0 },
            TaskEvent::Exit { exit_code: 2 },
            TaskEvent::TimeOut {
                reason: "t".into(),
                exit_code: Some(-15),
            },
            TaskEvent::Kill {
                reason: "k".into(),
                exit_code: None,
            },
            TaskEvent::Fail { reason: "f".into() },
            TaskEvent::Lose { reason: "l".into() },
        ]
    }

    fn in_status(status: TaskStatus) -> TaskRuntime {
        TaskRuntime {
            status,
            ..TaskRuntime::new(1.0)
        }
    }

    #[test]
    fn names_and_finality_match_the_reference() {
        let names: Vec<&str> = ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            names,
            [
                "created",
                "starting",
                "running",
                "awaiting_approval",
                "completed",
                "failed",
                "killed",
                "lost"
            ]
        );
        for status in ALL {
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                serde_json::Value::String(status.as_str().into())
            );
        }
        let terminal: Vec<TaskStatus> = ALL.into_iter().filter(|s| s.is_terminal()).collect();
        assert_eq!(
            terminal,
            [
                TaskStatus::Completed,
                TaskStatus::Failed,
                TaskStatus::Killed,
                TaskStatus::Lost
            ]
        );
    }

    /// Every (status, event) pair: the resulting status, or `None` for an illegal transition.
    #[test]
    fn the_whole_transition_table() {
        use TaskStatus as S;
        let expected: [(S, [Option<S>; 10]); 4] = [
            (
                S::Created,
                [
                    Some(S::Starting),
                    Some(S::Running),
                    None,
                    None,
                    Some(S::Completed),
                    Some(S::Failed),
                    Some(S::Failed),
                    Some(S::Killed),
                    Some(S::Failed),
                    Some(S::Lost),
                ],
            ),
            (
                S::Starting,
                [
                    None,
                    Some(S::Running),
                    Some(S::AwaitingApproval),
                    None,
                    Some(S::Completed),
                    Some(S::Failed),
                    Some(S::Failed),
                    Some(S::Killed),
                    Some(S::Failed),
                    Some(S::Lost),
                ],
            ),
            (
                S::Running,
                [
                    None,
                    None,
                    Some(S::AwaitingApproval),
                    None,
                    Some(S::Completed),
                    Some(S::Failed),
                    Some(S::Failed),
                    Some(S::Killed),
                    Some(S::Failed),
                    Some(S::Lost),
                ],
            ),
            (
                S::AwaitingApproval,
                [
                    None,
                    None,
                    None,
                    Some(S::Running),
                    Some(S::Completed),
                    Some(S::Failed),
                    Some(S::Failed),
                    Some(S::Killed),
                    Some(S::Failed),
                    Some(S::Lost),
                ],
            ),
        ];
        for (from, targets) in expected {
            for (event, target) in events().into_iter().zip(targets) {
                let mut runtime = in_status(from);
                let name = event.name();
                let result = runtime.apply(event, 5.0);
                match target {
                    Some(to) => {
                        assert_eq!(result, Ok(Applied::Changed(to)), "{from} + {name}");
                        assert_eq!(runtime.status, to);
                        assert_eq!(runtime.updated_at, 5.0);
                        assert_eq!(runtime.finished_at.is_some(), to.is_terminal(), "{from} + {name}");
                    }
                    None => {
                        assert_eq!(
                            result,
                            Err(IllegalTransition { from, event: name }),
                            "{from} + {name}"
                        );
                        assert_eq!(runtime, in_status(from), "an illegal event changes nothing");
                    }
                }
            }
        }
    }

    #[test]
    fn final_statuses_never_change() {
        for from in ALL.into_iter().filter(|s| s.is_terminal()) {
            for event in events() {
                let mut runtime = in_status(from);
                assert_eq!(runtime.apply(event, 5.0), Ok(Applied::AlreadyFinal(from)));
                assert_eq!(runtime, in_status(from));
            }
        }
    }

    #[test]
    fn each_event_records_what_the_reference_records() {
        let mut runtime = TaskRuntime::new(1.0);
        runtime.apply(TaskEvent::Launch { worker_pid: 7 }, 2.0).unwrap();
        runtime
            .apply(TaskEvent::Start { child_pid: Some(99) }, 3.0)
            .unwrap();
        assert_eq!(
            (
                runtime.worker_pid,
                runtime.child_pid,
                runtime.child_pgid,
                runtime.started_at
            ),
            (Some(7), Some(99), Some(99), Some(2.0))
        );
        let mut failed = runtime.clone();
        failed.apply(TaskEvent::Exit { exit_code: 3 }, 4.0).unwrap();
        assert_eq!(failed.status, TaskStatus::Failed);
        assert_eq!(failed.exit_code, Some(3));
        assert_eq!(
            failed.failure_reason.as_deref(),
            Some("Command failed with exit code 3")
        );
        assert_eq!(failed.terminal_reason(), "failed");
        assert!(!failed.interrupted);

        let mut timed_out = runtime.clone();
        timed_out
            .apply(
                TaskEvent::TimeOut {
                    reason: "Command timed out after 1s".into(),
                    exit_code: Some(-15),
                },
                4.0,
            )
            .unwrap();
        assert_eq!(
            (
                timed_out.status,
                timed_out.interrupted,
                timed_out.timed_out,
                timed_out.terminal_reason()
            ),
            (TaskStatus::Failed, true, true, "timed_out")
        );

        let mut killed = runtime.clone();
        killed
            .apply(
                TaskEvent::Kill {
                    reason: "Stopped by TaskStop".into(),
                    exit_code: Some(-15),
                },
                4.0,
            )
            .unwrap();
        assert_eq!(
            (
                killed.status,
                killed.interrupted,
                killed.exit_code,
                killed.finished_at,
                killed.terminal_reason()
            ),
            (TaskStatus::Killed, true, Some(-15), Some(4.0), "killed")
        );

        let mut completed = runtime;
        completed.apply(TaskEvent::Exit { exit_code: 0 }, 4.0).unwrap();
        assert_eq!(completed.failure_reason, None);
        assert_eq!(completed.exit_code, Some(0));
    }

    #[test]
    fn a_started_task_keeps_its_start_time() {
        let mut runtime = TaskRuntime::new(1.0);
        runtime.apply(TaskEvent::Start { child_pid: None }, 3.0).unwrap();
        assert_eq!(runtime.started_at, Some(3.0));
        assert_eq!(runtime.child_pgid, None);
        runtime
            .apply(
                TaskEvent::AwaitApproval {
                    reason: "waiting".into(),
                },
                4.0,
            )
            .unwrap();
        assert_eq!(runtime.failure_reason.as_deref(), Some("waiting"));
        runtime.apply(TaskEvent::Resume, 5.0).unwrap();
        assert_eq!(runtime.failure_reason, None);
        assert_eq!(runtime.started_at, Some(3.0));
    }
}
