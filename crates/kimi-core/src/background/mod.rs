//! Background tasks: work that goes on after the tool call that started it returned, such as
//! `Shell(run_in_background=true)`.
//!
//! [`TaskManager`] owns the session's tasks: it starts them, supervises them, stops them, and publishes
//! a notification when one ends. Each task's records live under `<session>/tasks/<id>/` in the
//! reference's names and formats ([`store`]), so sessions move between the two implementations. A
//! task's status follows the state machine in [`status`]. Tools reach the manager through their
//! dependencies; the root agent alone may start, stop or read tasks (a subagent's handle refuses).
//!
//! Layout: `model.rs` (the records), `status.rs` (statuses and transitions), `ids.rs`, `store.rs`,
//! `bash.rs` (running a command detached from the turn), `manager.rs`, `format.rs` (tasks as text for
//! the model), `notify.rs` (the notification of a task's end).

mod bash;
mod format;
mod ids;
mod manager;
pub mod model;
mod notify;
pub mod status;
pub mod store;
#[cfg(test)]
mod tests;

pub use format::{agent_lines, format_task, format_task_list};
pub use manager::{BashTaskRequest, NewTask, SESSION_ENDED, TaskManager};
pub use model::{OwnerRole, TaskKind, TaskRuntime, TaskSpec, TaskStatus, TaskView};
pub use status::TaskEvent;
