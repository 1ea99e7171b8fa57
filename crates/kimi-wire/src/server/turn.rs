//! The turn slot: at most one turn (a `prompt`, a `replay`, or a turn the agent starts itself) runs at a
//! time, and `cancel` / `steer` reach whichever one it is.
//!
//! Turns normally start from a client `prompt`. The agent may also start one on its own (a scheduled
//! prompt firing) through a [`TurnStarter`]: it waits until the slot is free, claims it as a `prompt`
//! would, and holds the returned [`AgentTurn`] while the turn runs. The client sees the turn's events as
//! for any turn, gets "An agent turn is already in progress" for a `prompt` meanwhile, and can `cancel`
//! it; the turn is over for the client when its `TurnEnd` is sent. Agent turns never start before the
//! client has finished `initialize` or started a turn of its own (a resumed session cannot push a turn in
//! front of the handshake), nor between the end of a client turn and the answer to its request (the
//! client never sees a turn begin before the answer to its own `prompt`).

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::pending::{Abandoned, PendingRequests, RequestScope};

/// The server is shutting down: no turn starts any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the server is shutting down")]
pub struct ShuttingDown;

/// Who started the running turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// A `prompt` or `replay` request; it ends when the request is answered.
    Client,
    /// The agent, through [`TurnStarter`]; the number tells its turns apart.
    Agent(u64),
}

#[derive(Debug)]
struct Running {
    cancel: CancellationToken,
    owner: Owner,
}

#[derive(Debug, Default)]
struct SlotState {
    /// The running turn, if one runs.
    running: Option<Running>,
    /// Numbers the agent's turns.
    agent_turns: u64,
    /// The client finished `initialize` or started a turn: agent turns may start.
    client_ready: bool,
    /// A client turn ended and its answer is not queued yet: agent turns wait for it.
    replying: bool,
    /// The server is shutting down: no turn starts any more.
    closed: bool,
}

impl SlotState {
    /// May the agent start a turn once none runs?
    fn is_open_to_agent(&self) -> bool {
        self.client_ready && !self.replying && !self.closed
    }
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
        self.claim(Owner::Client).map(|(cancel, _)| cancel)
    }

    /// Claims the slot; an agent turn gets its number here.
    fn claim(&self, owner: Owner) -> Option<(CancellationToken, Owner)> {
        let mut claimed = None;
        self.0.send_if_modified(|state| {
            let allowed = match owner {
                Owner::Client => !state.closed,
                Owner::Agent(_) => state.is_open_to_agent(),
            };
            if state.running.is_some() || !allowed {
                return false;
            }
            let owner = match owner {
                Owner::Client => Owner::Client,
                Owner::Agent(_) => {
                    state.agent_turns += 1;
                    Owner::Agent(state.agent_turns)
                }
            };
            let cancel = CancellationToken::new();
            state.running = Some(Running {
                cancel: cancel.clone(),
                owner,
            });
            state.client_ready = true;
            claimed = Some((cancel, owner));
            true
        });
        claimed
    }

    /// If the agent's turn `owner` still holds the slot (its `TurnEnd` may have freed it already): abandons
    /// the requests it left unanswered, then frees the slot, in that order so that a turn starting next
    /// never loses its own requests.
    fn finish_agent_turn(&self, owner: Owner, pending: &PendingRequests) {
        if !self.is_running(owner) {
            return;
        }
        pending.abandon_scope(RequestScope::Turn, Abandoned::TurnEnded);
        // Only the turn's owner ends it, so it still runs here.
        self.0.send_if_modified(|state| {
            let ours = state.running.as_ref().is_some_and(|r| r.owner == owner);
            if ours {
                state.running = None;
            }
            ours
        });
    }

    fn is_running(&self, owner: Owner) -> bool {
        self.0.borrow().running.as_ref().is_some_and(|r| r.owner == owner)
    }

    /// A `TurnEnd` event was queued. For a turn the agent started this is where it ends for the client:
    /// the slot is freed at once rather than when the agent has also saved the session, so a `prompt`
    /// sent on seeing `TurnEnd` is accepted. Client turns end with their answer instead.
    pub(crate) fn turn_end_sent(&self, pending: &PendingRequests) {
        let owner = self.0.borrow().running.as_ref().map(|r| r.owner);
        if let Some(owner @ Owner::Agent(_)) = owner {
            self.finish_agent_turn(owner, pending);
        }
    }

    /// Ends a client turn whose answer is about to be queued: clients may start the next turn at once,
    /// the agent only after [`TurnSlot::replied`].
    pub(crate) fn end_before_reply(&self) {
        self.0.send_modify(|state| {
            state.running = None;
            state.replying = true;
        });
    }

    /// The answer to the client turn that ended is queued.
    pub(crate) fn replied(&self) {
        self.0
            .send_if_modified(|state| std::mem::take(&mut state.replying));
    }

    /// The running turn's cancellation.
    pub(crate) fn current(&self) -> Option<CancellationToken> {
        self.0.borrow().running.as_ref().map(|r| r.cancel.clone())
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
            running = state.running.as_ref().map(|r| r.cancel.clone());
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

    /// Resolves when an agent turn could start: the client is ready and no turn runs. Another claimant
    /// may still win the race, so follow it with [`TurnStarter::try_begin`] and wait again when that
    /// returns `None`. Fails once the server is shutting down.
    pub async fn wait_idle(&self) -> Result<(), ShuttingDown> {
        let mut rx = self.slot.0.subscribe();
        let state = rx
            .wait_for(|state| state.closed || (state.is_open_to_agent() && state.running.is_none()))
            .await
            .map_err(|_| ShuttingDown)?;
        if state.closed {
            return Err(ShuttingDown);
        }
        Ok(())
    }

    /// Claims the slot as a `prompt` would; `None` when a turn runs, the client is not ready yet, or the
    /// server is closing.
    pub fn try_begin(&self) -> Option<AgentTurn> {
        let (cancel, owner) = self.slot.claim(Owner::Agent(0))?;
        Some(AgentTurn {
            cancel,
            owner,
            slot: Arc::clone(&self.slot),
            pending: Arc::clone(&self.pending),
        })
    }
}

/// A turn the agent started. The slot is taken until its `TurnEnd` event is sent or, at the latest, until
/// this is dropped; then requests the turn left unanswered are abandoned and the slot is freed, as when a
/// `prompt` returns.
#[derive(Debug)]
pub struct AgentTurn {
    cancel: CancellationToken,
    owner: Owner,
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
        self.slot.finish_agent_turn(self.owner, &self.pending);
    }
}

#[cfg(test)]
mod tests {
    use super::super::pending::Answer;
    use super::*;

    fn starter() -> (Arc<TurnSlot>, TurnStarter) {
        let slot = Arc::new(TurnSlot::default());
        let starter = TurnStarter::new(Arc::clone(&slot), Arc::new(PendingRequests::default()));
        (slot, starter)
    }

    /// Ends a client turn and its answer.
    fn answer(slot: &TurnSlot) {
        slot.end_before_reply();
        slot.replied();
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
        slot.begin().expect("free again");
        assert!(
            starter.try_begin().is_none(),
            "an agent turn waits for the prompt"
        );
        answer(&slot);
        assert!(starter.try_begin().is_some());
    }

    #[test]
    fn a_client_turn_makes_the_client_ready() {
        let (slot, starter) = starter();
        slot.begin().expect("idle");
        answer(&slot);
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

    #[test]
    fn agent_turns_wait_for_the_answer_to_the_last_client_turn() {
        let (slot, starter) = starter();
        slot.begin().expect("idle");
        slot.end_before_reply();
        assert!(starter.try_begin().is_none(), "the answer is not out yet");
        slot.begin().expect("clients need not wait");
        answer(&slot);
        assert!(starter.try_begin().is_some());
    }

    #[tokio::test]
    async fn a_turn_end_frees_an_agent_turn_but_not_a_client_turn() {
        let (slot, starter) = starter();
        let pending = Arc::clone(&starter.pending);
        slot.begin().expect("idle");
        slot.turn_end_sent(&pending);
        assert!(slot.current().is_some(), "a prompt ends with its answer");
        answer(&slot);

        let turn = starter.try_begin().expect("idle");
        let left_over = pending.register("q1", RequestScope::Turn).unwrap();
        slot.turn_end_sent(&pending);
        assert!(slot.current().is_none(), "free once TurnEnd is out");
        assert_eq!(left_over.wait().await, Answer::Abandoned(Abandoned::TurnEnded));
        slot.begin().expect("a prompt sent on seeing TurnEnd is accepted");
        let _asked = pending.register("q2", RequestScope::Turn).unwrap();
        // The agent turn finishing its work afterwards leaves the new turn and its requests alone.
        drop(turn);
        assert!(slot.current().is_some());
        assert_eq!(pending.len(), 1);
    }

    #[tokio::test]
    async fn wait_idle_follows_the_slot_and_fails_once_closed() {
        let (slot, starter) = starter();
        let waiting = tokio::spawn({
            let starter = starter.clone();
            async move { starter.wait_idle().await }
        });
        slot.begin().expect("idle");
        slot.end_before_reply();
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "waits for the answer");
        slot.replied();
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
        assert_eq!(waiting.await.unwrap(), Err(ShuttingDown));
        drop(turn);
        slot.ended().await;
        assert!(starter.try_begin().is_none(), "closed");
        assert!(slot.begin().is_none(), "closed for clients too");
    }

    /// The whole server over an in-memory pipe: an agent turn refuses prompts, takes `steer` and
    /// `cancel`, and frees the slot when its TurnEnd goes out or when it is dropped.
    mod through_the_server {
        use async_trait::async_trait;
        use serde_json::{Value, json};
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

        use super::*;
        use crate::message::{Event, TurnEnd, UserInput};
        use crate::params::{
            InitializeParams, InitializeResult, PromptResult, ReplayResult, SetPlanModeResult, SteerResult,
        };
        use crate::{RpcError, Server, ServerConfig, WireAgent};

        /// Finishes every prompt at once.
        struct Quick;

        #[async_trait]
        impl WireAgent for Quick {
            async fn initialize(&self, _: InitializeParams) -> Result<InitializeResult, RpcError> {
                Err(RpcError::internal("not used"))
            }
            async fn prompt(&self, _: UserInput, _: CancellationToken) -> Result<PromptResult, RpcError> {
                Ok(PromptResult::finished())
            }
            async fn steer(&self, _: UserInput) -> Result<SteerResult, RpcError> {
                Ok(SteerResult::default())
            }
            async fn set_plan_mode(&self, _: bool) -> Result<SetPlanModeResult, RpcError> {
                Err(RpcError::internal("not used"))
            }
            async fn replay(&self, _: CancellationToken) -> Result<ReplayResult, RpcError> {
                Err(RpcError::internal("not used"))
            }
            async fn shutdown(&self) {}
        }

        /// The test's end of the pipe.
        struct Client {
            write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
            lines: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
        }

        impl Client {
            async fn next(&mut self) -> Value {
                let line = tokio::time::timeout(std::time::Duration::from_secs(5), self.lines.next_line())
                    .await
                    .unwrap()
                    .unwrap()
                    .unwrap();
                serde_json::from_str(&line).unwrap()
            }

            async fn call(&mut self, id: &str, method: &str, params: Value) -> Value {
                let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
                self.write
                    .write_all(format!("{line}\n").as_bytes())
                    .await
                    .unwrap();
                self.next().await
            }
        }

        #[tokio::test]
        async fn an_agent_turn_holds_the_slot_like_a_prompt() {
            let (server, handle) = Server::new(ServerConfig::default());
            let starter = server.turn_starter();
            let (ours, theirs) = tokio::io::duplex(1 << 16);
            let (server_in, server_out) = tokio::io::split(theirs);
            let running =
                tokio::spawn(server.run(server_in, server_out, Arc::new(Quick), std::future::pending()));
            let (read, write) = tokio::io::split(ours);
            let mut client = Client {
                write,
                lines: BufReader::new(read).lines(),
            };
            let hi = || json!({"user_input": "hi"});
            let finished = json!({"status": "finished"});

            assert!(starter.try_begin().is_none(), "the client has not spoken yet");
            assert_eq!(client.call("1", "prompt", hi()).await["result"], finished);
            starter.wait_idle().await.unwrap();
            let turn = starter.try_begin().expect("idle and ready");
            assert_eq!(
                client.call("2", "prompt", hi()).await["error"],
                json!({"code": -32000, "message": "An agent turn is already in progress", "data": null})
            );
            let steered = client.call("3", "steer", json!({"user_input": "more"})).await;
            assert_eq!(steered["result"], json!({"status": "steered"}));
            assert!(!turn.cancel_token().is_cancelled());
            assert_eq!(client.call("4", "cancel", json!({})).await["result"], json!({}));
            assert!(turn.cancel_token().is_cancelled());
            drop(turn);
            assert_eq!(client.call("5", "prompt", hi()).await["result"], finished);

            // A TurnEnd sent by the agent ends its turn for the client, though the agent still holds it.
            starter.wait_idle().await.unwrap();
            let turn = starter.try_begin().expect("idle");
            handle.send_event(&Event::TurnEnd(TurnEnd {})).await.unwrap();
            assert_eq!(client.next().await["params"]["type"], "TurnEnd");
            assert_eq!(client.call("6", "prompt", hi()).await["result"], finished);
            drop(turn);

            // EOF for the server (the read half still holds the pipe open, so dropping is not enough).
            client.write.shutdown().await.unwrap();
            tokio::time::timeout(std::time::Duration::from_secs(5), running)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(starter.wait_idle().await, Err(ShuttingDown));
        }
    }
}
