//! Client-side hooks: subscriptions a client registered in `initialize`, answered through a
//! `HookRequest` per trigger.
//!
//! Reference (`hooks/engine.py` `_dispatch_wire_hook`, `wire/server.py`): the request's id is 12 hex
//! digits of a random UUID; the subscription's timeout covers the whole round trip; a timeout, an
//! error response, an answer that does not validate and an abandoned request all allow. The request
//! goes straight to the client and is not recorded in `wire.jsonl`.

use std::time::Duration;

use kimi_wire::message::{HookAction, HookAnswer, HookRequest};
use kimi_wire::{ClientHandle, NoAnswer, RequestScope};
use serde_json::{Map, Value};

use super::Verdict;
use super::matcher::Matcher;

/// A registered client subscription.
#[derive(Debug, Clone)]
pub(crate) struct Subscription {
    pub(crate) id: String,
    pub(crate) event: crate::config::HookEvent,
    pub(crate) matcher: Matcher,
    pub(crate) timeout: Duration,
}

/// What one client-side hook asks of the client.
pub(crate) struct Ask<'a> {
    pub(crate) subscription_id: &'a str,
    pub(crate) event: &'a str,
    pub(crate) target: &'a str,
    pub(crate) input: Map<String, Value>,
    pub(crate) timeout: Duration,
}

/// Sends one `HookRequest` and waits (bounded) for the client's verdict. Never fails.
pub(crate) async fn ask(client: &ClientHandle, ask: Ask<'_>) -> Verdict {
    let id = request_id();
    let request = HookRequest {
        id: id.clone(),
        subscription_id: ask.subscription_id.to_owned(),
        event: ask.event.to_owned(),
        target: ask.target.to_owned(),
        input_data: ask.input,
    };
    // Reference: the turn's `finally` resolves its unanswered HookRequests to allow; a turn-scoped
    // request does the same here. Dropping the waiter on timeout unregisters it.
    match tokio::time::timeout(ask.timeout, client.ask(&request, RequestScope::Turn)).await {
        Err(_elapsed) => {
            tracing::warn!(
                event = ask.event,
                target = ask.target,
                "wire hook timed out; allowing"
            );
            Verdict::Allow
        }
        Ok(Err(NoAnswer::NotSent(error))) => {
            tracing::warn!(event = ask.event, target = ask.target, %error, "wire hook could not be sent; allowing");
            Verdict::Allow
        }
        Ok(answer) => verdict(&id, answer),
    }
}

/// The client's answer as a verdict.
pub(crate) fn verdict(id: &str, answer: Result<HookAnswer, NoAnswer>) -> Verdict {
    let answer = match answer {
        Ok(answer) => answer,
        Err(NoAnswer::Malformed(error)) => {
            tracing::error!(id, %error, "invalid hook response; allowing");
            return Verdict::Allow;
        }
        Err(NoAnswer::Error(error)) => {
            tracing::warn!(id, code = error.code, message = %error.message, "wire hook answered with an error; allowing");
            return Verdict::Allow;
        }
        Err(why) => {
            tracing::debug!(id, %why, "wire hook abandoned; allowing");
            return Verdict::Allow;
        }
    };
    if answer.request_id != id {
        // Reference: only logged; the JSON-RPC id is what matched the answer.
        tracing::warn!(request = id, response = %answer.request_id, "hook response id mismatch");
    }
    match answer.action {
        HookAction::Allow => Verdict::Allow,
        HookAction::Block => Verdict::Block(answer.reason),
    }
}

/// 12 hex digits of a random UUID (reference: `uuid4().hex[:12]`).
fn request_id() -> String {
    let mut id = uuid::Uuid::new_v4().simple().to_string();
    id.truncate(12);
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use kimi_wire::{Abandoned, Answer, RpcError};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn ids_are_twelve_hex_digits() {
        let id = request_id();
        assert_eq!(id.len(), 12);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(id, request_id());
    }

    #[test]
    fn answers_map_to_verdicts() {
        let block = json!({"request_id": "abc", "action": "block", "reason": "client says no"});
        assert_eq!(
            verdict("abc", Answer::Result(block).read()),
            Verdict::Block("client says no".into())
        );
        assert_eq!(
            verdict("abc", Answer::Result(json!({"request_id": "abc"})).read()),
            Verdict::Allow
        );
        let mismatched = json!({"request_id": "zzz", "action": "block"});
        assert_eq!(
            verdict("abc", Answer::Result(mismatched).read()),
            Verdict::Block(String::new())
        );
    }

    #[test]
    fn anything_unusable_allows() {
        for bad in [
            json!({"action": "block"}),
            json!({"request_id": "abc", "action": "deny"}),
            json!("block"),
            Value::Null,
        ] {
            assert_eq!(
                verdict("abc", Answer::Result(bad.clone()).read()),
                Verdict::Allow,
                "{bad}"
            );
        }
        assert_eq!(
            verdict("abc", Answer::Error(RpcError::new(-32000, "x")).read()),
            Verdict::Allow
        );
        assert_eq!(
            verdict("abc", Answer::Abandoned(Abandoned::TurnEnded).read()),
            Verdict::Allow
        );
    }
}
