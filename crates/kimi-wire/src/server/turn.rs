//! The turn slot: at most one turn (a `prompt`, a `replay`, or a turn the agent starts itself) runs at a
//! time, and `cancel` / `steer` reach whichever one it is.
//!
//! Turns normally start from a client `prompt`. The agent may also start one on its own (a scheduled
//! prompt firing) through a [`TurnStarter`]: it waits until the slot is free, claims it as a `prompt`
//! would, and holds the returned [`AgentTurn`] while the turn runs. The client sees the turn's events as
//! for any turn, gets "An agent turn is already in progress" for a `prompt` meanwhile, and can `cancel`
//! it. Agent turns never start before the client has finished `initialize` or started a turn of its own,
//! so a resumed session cannot push a turn in front of the client's handshake.

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::pending::{Abandoned, PendingRequests, RequestScope};
use crate::agent::ConnectionClosed;

#[derive(Debug, Default)]
struct SlotState {
    /// The running turn's cancellation, if one runs.
    running: Option<CancellationToken>,
    /// The client finished `initialize` or started a turn: agent turns may start.
    client_ready: bool,
    /// The server is shutting down: no turn starts any more.
    closed: bool,
}

/// Whether a turn runs, and how to cancel it. The reference calls this "streaming".
#[derive(Debug)]
pub(crate) struct TurnSlot(watch::Sender<SlotState>);

impl Default for TurnSlot {
    fn default() -> Self {
        Self(watch::Sender::new(SlotState::default()))
    }
}

impl TurnSlot {
    /// Claims the slot for a client request; `None` when something already runs. A client that starts a
    /// turn is ready for agent turns too.
    pub(crate) fn begin(&self) -> Option<CancellationToken> {
        let token = self.claim(true)?;
        Some(token)
    }

    fn claim(&self, by_client: bool) -> Option<CancellationToken> {
        let mut claimed = None;
        self.0.send_if_modified(|state| {
            let allowed = if by_client {
                !state.closed
            } else {
                state.client_ready && !state.closed
            };
            if state.running.is_some() || !allowed {
                return false;
            }
            let token = CancellationToken::new();
            state.running = Some(token.clone());
            state.client_ready = true;
            claimed = Some(token);
            true
        });
        claimed
    }

    pub(crate) fn end(&self) {
        self.0.send_if_modified(|state| state.running.take().is_some());
    }

    pub(crate) fn current(&self) -> Option<CancellationToken> {
        self.0.borrow().running.clone()
    }

    /// The client finished `initialize`.
    pub(crate) fn mark_client_ready(&self) {
        self.0
            .send_if_modified(|state| !std::mem::replace(&mut state.client_ready, true));
    }

    /// Refuses every later claim and returns the running turn's token, if any.
    pub(crate) fn close(&self) -> Option<CancellationToken> {
        let mut running = None;
        self.0.send_modify(|state| {
            state.closed = true;
            running = state.running.clone();
        });
        running
    }

    /// Resolves when no turn runs.
    pub(crate) async fn ended(&self) {
        let mut rx = self.0.subscribe();
        // The sender lives as long as `self`, so this cannot fail.
        let _ = rx.wait_for(|state| state.running.is_none()).await;
    }
}

/// Lets the agent start turns of its own. Get one from [`crate::Server::turn_starter`].
#[derive(Debug, Clone)]
pub struct TurnStarter {
    slot: Arc<TurnSlot>,
    pending: Arc<PendingRequests>,
}

impl TurnStarter {
    pub(crate) fn new(slot: Arc<TurnSlot>, pending: Arc<PendingRequests>) -> Self {
        Self { slot, pending }
    }

    /// Resolves when the client is ready and no turn runs. Another claimant may still win the race, so
    /// follow it with [`TurnStarter::try_begin`] and wait again when that returns `None`.
    pub async fn wait_idle(&self) -> Result<(), ConnectionClosed> {
        let mut rx = self.slot.0.subscribe();
        let state = rx
            .wait_for(|state| state.closed || (state.client_ready && state.running.is_none()))
            .await
            .map_err(|_| ConnectionClosed)?;
        if state.closed {
            return Err(ConnectionClosed);
        }
        Ok(())
    }

    /// Claims the slot as a `prompt` would; `None` when a turn runs, the client is not ready yet, or the
    /// server is closing.
    pub fn try_begin(&self) -> Option<AgentTurn> {
        let cancel = self.slot.claim(false)?;
        Some(AgentTurn {
            cancel,
            slot: Arc::clone(&self.slot),
            pending: Arc::clone(&self.pending),
        })
    }
}

/// A turn the agent started. While it is held, the slot is taken; dropping it ends the turn for the
/// server: requests the turn left unanswered are abandoned and the slot is freed, as when a `prompt`
/// returns.
#[derive(Debug)]
pub struct AgentTurn {
    cancel: CancellationToken,
    slot: Arc<TurnSlot>,
    pending: Arc<PendingRequests>,
}

impl AgentTurn {
    /// Fires when the client sends `cancel` or the connection closes.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }
}

impl Drop for AgentTurn {
    fn drop(&mut self) {
        self.pending
            .abandon_scope(RequestScope::Turn, Abandoned::TurnEnded);
        self.slot.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn starter() -> (Arc<TurnSlot>, TurnStarter) {
        let slot = Arc::new(TurnSlot::default());
        let starter = TurnStarter::new(Arc::clone(&slot), Arc::new(PendingRequests::default()));
        (slot, starter)
    }

    #[test]
    fn agent_turns_wait_for_the_client() {
        let (slot, starter) = starter();
        assert!(starter.try_begin().is_none(), "before initialize");
        slot.mark_client_ready();
        let turn = starter.try_begin().expect("ready and idle");
        assert!(slot.begin().is_none(), "a prompt during an agent turn is refused");
        assert!(starter.try_begin().is_none(), "one turn at a time");
        drop(turn);
        assert!(slot.current().is_none(), "dropping the turn frees the slot");
        let prompt = slot.begin().expect("free again");
        assert!(
            starter.try_begin().is_none(),
            "an agent turn waits for the prompt"
        );
        drop(prompt);
        slot.end();
        assert!(starter.try_begin().is_some());
    }

    #[test]
    fn a_client_turn_makes_the_client_ready() {
        let (slot, starter) = starter();
        slot.begin().expect("idle");
        slot.end();
        assert!(starter.try_begin().is_some());
    }

    #[test]
    fn cancel_reaches_the_agent_turn() {
        let (slot, starter) = starter();
        slot.mark_client_ready();
        let turn = starter.try_begin().expect("idle");
        slot.current().expect("running").cancel();
        assert!(turn.cancel_token().is_cancelled());
    }

    #[tokio::test]
    async fn wait_idle_follows_the_slot_and_fails_once_closed() {
        let (slot, starter) = starter();
        let waiting = tokio::spawn({
            let starter = starter.clone();
            async move { starter.wait_idle().await }
        });
        slot.begin().expect("idle");
        slot.end();
        assert_eq!(waiting.await.unwrap(), Ok(()));

        let turn = starter.try_begin().expect("ready");
        let waiting = tokio::spawn({
            let starter = starter.clone();
            async move { starter.wait_idle().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        let token = slot.close().expect("the agent turn runs");
        token.cancel();
        assert_eq!(waiting.await.unwrap(), Err(ConnectionClosed));
        drop(turn);
        slot.ended().await;
        assert!(starter.try_begin().is_none(), "closed");
        assert!(slot.begin().is_none(), "closed for clients too");
    }
}
