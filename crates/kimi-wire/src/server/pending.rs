//! The registry of server->client requests that await the client's answer.
//!
//! A request is registered *before* its line is queued, so an answer that arrives at once is never lost;
//! the asker awaits its own oneshot, so the event stream is never blocked on a client (the bug the
//! reference fixed in kimi-cli #1106 and kimi-agent-rs still has). Every entry ends deterministically:
//! answered, abandoned at turn end, or abandoned when the connection closes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;
use tokio::sync::oneshot;

use crate::error_code::RpcError;

/// How long a request may stay pending, in terms of what ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestScope {
    /// Belongs to the running `prompt`; abandoned when it returns.
    Turn,
    /// Outlives turns (background agents); abandoned only when the connection closes.
    Session,
}

/// Why a pending request got no answer from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abandoned {
    /// The turn that asked ended (finished, failed or cancelled) first.
    TurnEnded,
    /// The client closed stdin (or stdout broke) first.
    ConnectionClosed,
}

/// What the asker receives.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The client's `result`, not yet validated against the request kind.
    Result(Value),
    /// The client's `error`.
    Error(RpcError),
    /// No answer will come; the asker applies the reference's default for its kind.
    Abandoned(Abandoned),
}

struct Entry {
    scope: RequestScope,
    tx: oneshot::Sender<Answer>,
}

/// Pending requests by JSON-RPC id. A std mutex: no `.await` happens while it is held.
#[derive(Default)]
pub struct PendingRequests {
    entries: Mutex<HashMap<String, Entry>>,
}

impl std::fmt::Debug for PendingRequests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingRequests")
            .field("len", &self.len())
            .finish()
    }
}

/// A registered id was already pending.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a request with id `{0}` is already pending")]
pub struct DuplicateId(pub String);

impl PendingRequests {
    /// Registers `id`; the returned waiter removes the entry again when dropped unanswered.
    pub fn register(self: &Arc<Self>, id: &str, scope: RequestScope) -> Result<PendingAnswer, DuplicateId> {
        let (tx, rx) = oneshot::channel();
        let mut entries = self.lock();
        if entries.contains_key(id) {
            return Err(DuplicateId(id.to_owned()));
        }
        entries.insert(id.to_owned(), Entry { scope, tx });
        Ok(PendingAnswer {
            id: id.to_owned(),
            rx,
            registry: Arc::downgrade(self),
        })
    }

    /// Delivers the client's answer. Returns false for an id nobody waits for (logged by the caller).
    pub fn resolve(&self, id: &str, answer: Answer) -> bool {
        let entry = self.lock().remove(id);
        match entry {
            Some(entry) => entry.tx.send(answer).is_ok(),
            None => false,
        }
    }

    /// Abandons every pending request of `scope` (turn end).
    pub fn abandon_scope(&self, scope: RequestScope, reason: Abandoned) {
        let drained: Vec<Entry> = {
            let mut entries = self.lock();
            let ids: Vec<String> = entries
                .iter()
                .filter(|(_, e)| e.scope == scope)
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| entries.remove(id)).collect()
        };
        for entry in drained {
            let _ = entry.tx.send(Answer::Abandoned(reason));
        }
    }

    /// Abandons everything (connection closed).
    pub fn abandon_all(&self, reason: Abandoned) {
        let drained: Vec<Entry> = self.lock().drain().map(|(_, e)| e).collect();
        for entry in drained {
            let _ = entry.tx.send(Answer::Abandoned(reason));
        }
    }

    /// Is anything still waiting?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many requests are waiting.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        // A poisoned map is still a consistent map: entries are inserted and removed whole.
        crate::sync::lock(&self.entries)
    }
}

/// The asker's side of one pending request.
#[derive(Debug)]
pub struct PendingAnswer {
    id: String,
    rx: oneshot::Receiver<Answer>,
    registry: Weak<PendingRequests>,
}

impl PendingAnswer {
    /// The JSON-RPC id the request was sent with.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Waits for the answer. A registry that went away counts as a closed connection.
    pub async fn wait(mut self) -> Answer {
        (&mut self.rx)
            .await
            .unwrap_or(Answer::Abandoned(Abandoned::ConnectionClosed))
    }
}

impl Drop for PendingAnswer {
    fn drop(&mut self) {
        // A cancelled asker must not leave a stale entry that a late answer would try to complete.
        if let Some(registry) = self.registry.upgrade() {
            registry.lock().remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn an_answer_reaches_its_asker_only() {
        let reg = Arc::new(PendingRequests::default());
        let a = reg.register("a", RequestScope::Turn).unwrap();
        let b = reg.register("b", RequestScope::Turn).unwrap();
        assert!(reg.resolve("b", Answer::Result(json!(2))));
        assert!(!reg.resolve("zzz", Answer::Result(json!(0))));
        assert_eq!(b.wait().await, Answer::Result(json!(2)));
        assert_eq!(reg.len(), 1);
        assert!(reg.resolve("a", Answer::Result(json!(1))));
        assert_eq!(a.wait().await, Answer::Result(json!(1)));
        assert!(reg.is_empty());
    }

    #[tokio::test]
    async fn duplicate_ids_are_refused() {
        let reg = Arc::new(PendingRequests::default());
        let _a = reg.register("a", RequestScope::Turn).unwrap();
        assert_eq!(
            reg.register("a", RequestScope::Turn).unwrap_err(),
            DuplicateId("a".into())
        );
    }

    #[tokio::test]
    async fn turn_end_abandons_turn_requests_only() {
        let reg = Arc::new(PendingRequests::default());
        let turn = reg.register("t", RequestScope::Turn).unwrap();
        let session = reg.register("s", RequestScope::Session).unwrap();
        reg.abandon_scope(RequestScope::Turn, Abandoned::TurnEnded);
        assert_eq!(turn.wait().await, Answer::Abandoned(Abandoned::TurnEnded));
        assert_eq!(reg.len(), 1);
        reg.abandon_all(Abandoned::ConnectionClosed);
        assert_eq!(
            session.wait().await,
            Answer::Abandoned(Abandoned::ConnectionClosed)
        );
    }

    #[tokio::test]
    async fn a_dropped_asker_unregisters() {
        let reg = Arc::new(PendingRequests::default());
        drop(reg.register("a", RequestScope::Turn).unwrap());
        assert!(reg.is_empty());
        assert!(!reg.resolve("a", Answer::Result(json!(null))));
    }
}
