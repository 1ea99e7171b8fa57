//! The task that fires due jobs as turns.
//!
//! It sleeps until the earliest job is due (waking early when jobs change), then waits until no turn runs
//! and the client is ready, claims the turn slot as a `prompt` would, takes the earliest due fire from the
//! store, and runs it through the agent's `prompt` path, with the `<cron-fire>` envelope as the user's
//! input. A fire that comes due during a turn therefore waits for that turn to end, and the misses it
//! accumulates meanwhile are counted into the one fire.

use std::sync::Arc;

use kimi_wire::message::UserInput;
use kimi_wire::{TurnStarter, WireAgent};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::store::CronStore;

/// The running scheduler; stop it with [`CronScheduler::stop`].
#[derive(Debug)]
pub struct CronScheduler {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl CronScheduler {
    /// Starts firing `store`'s jobs as turns of `agent`, claimed through `turns`.
    pub fn spawn(store: Arc<CronStore>, turns: TurnStarter, agent: Arc<dyn WireAgent>) -> Self {
        let stop = CancellationToken::new();
        let task = tokio::spawn(run(store, turns, agent, stop.clone()));
        Self { stop, task }
    }

    /// Stops waiting for jobs. A fired turn still running is cancelled by the server when the connection
    /// closes; this waits for it.
    pub async fn stop(self) {
        self.stop.cancel();
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "cron scheduler failed");
        }
    }
}

async fn run(store: Arc<CronStore>, turns: TurnStarter, agent: Arc<dyn WireAgent>, stop: CancellationToken) {
    let clock = Arc::clone(store.clock());
    loop {
        // Wait until something is due, re-reading the jobs whenever they change.
        match store.next_fire_at() {
            Some(at) if at <= clock.now() => {}
            next => {
                let until_due = async {
                    match next {
                        Some(at) => clock.sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = store.changed() => {}
                    () = until_due => {}
                }
                continue;
            }
        }
        let idle = tokio::select! {
            () = stop.cancelled() => return,
            idle = turns.wait_idle() => idle,
        };
        if idle.is_err() {
            return;
        }
        // A client `prompt` may have taken the slot since; then wait again.
        let Some(turn) = turns.try_begin() else {
            continue;
        };
        let Some(fire) = store.take_due(clock.now()) else {
            continue;
        };
        // Saved before the turn runs: a crash during it must not fire the same job again on resume.
        store.save().await;
        tracing::info!(job = %fire.id, coalesced = fire.coalesced, stale = fire.stale, "cron job fired");
        let input = UserInput::Text(fire.envelope());
        if let Err(e) = agent.prompt(input, turn.cancel_token()).await {
            tracing::warn!(job = %fire.id, error = %e.message, "scheduled turn failed");
        }
        drop(turn);
    }
}
