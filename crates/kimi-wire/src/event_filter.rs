//! Which `event`s a connection's client gets: only the types it can parse.
//!
//! The reference sends every event to every client. Some clients validate each event against a fixed
//! table and report the others as errors: the official TypeScript SDK 0.1.x (which declares protocol
//! 1.7) turns `StepRetry`, `PlanDisplay`, `MCPLoadingBegin`/`MCPLoadingEnd`, `Notification` and the
//! `/btw` events into `UNKNOWN_EVENT_TYPE` parse errors. The declared protocol version cannot decide
//! alone: the reference's own suite declares 1.1 and expects `MCPLoadingBegin`, and `PlanDisplay` is
//! documented as a 1.7 event that the 1.7 SDK does not parse. So the choice is made per client, once,
//! at `initialize` ([`EventFilter::for_client`]):
//!
//! 1. `capabilities.events` when the client sends it: exactly those types (`"*"` for all);
//! 2. else a known client's profile: the SDK 0.1.x (its `client.name` starts with `kimi-agent-sdk/`, the
//!    VS Code extension included) declaring a version before 1.10 gets the types its schema parses;
//! 3. else everything, as the reference does (also before `initialize`).
//!
//! The filter applies to what is streamed or replayed, never to `wire.jsonl`, which keeps every event.
//! Requests (approvals, questions, tool calls, hooks) are never filtered: a client that cannot answer
//! them would leave the turn waiting.

use std::collections::BTreeSet;

use crate::message::Event;
use crate::params::InitializeParams;

/// The name prefix of the official TypeScript SDK's `initialize` client (`kimi-agent-sdk/0.1.8`,
/// followed by the embedding application's own `name/version` when it gives one).
const TS_SDK_CLIENT: &str = "kimi-agent-sdk/";

/// The first protocol version whose clients are assumed to parse every event of [`crate::PROTOCOL_VERSION`].
const ALL_EVENTS_SINCE: (u32, u32) = (1, 10);

/// The event types the TypeScript SDK 0.1.x parses (its `EventSchemas` table, plus `SubagentEvent`).
pub const TS_SDK_0_1_EVENTS: &[&str] = &[
    "TurnBegin",
    "TurnEnd",
    "StepBegin",
    "StepInterrupted",
    "CompactionBegin",
    "CompactionEnd",
    "StatusUpdate",
    "HookTriggered",
    "HookResolved",
    "ContentPart",
    "ToolCall",
    "ToolCallPart",
    "ToolResult",
    "ApprovalResponse",
    "SteerInput",
    "SubagentEvent",
];

/// Which event types a client is sent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum EventFilter {
    /// Every event (the reference's behaviour).
    #[default]
    All,
    /// Only these types; a `SubagentEvent` also needs its wrapped event's type.
    Only(BTreeSet<String>),
}

impl EventFilter {
    /// The filter for the client that sent `params` (see the module docs for the rules).
    pub fn for_client(params: &InitializeParams) -> Self {
        if let Some(capabilities) = &params.capabilities
            && let Some(events) = &capabilities.events
        {
            if capabilities.wants_every_event() {
                return Self::All;
            }
            return Self::Only(events.iter().cloned().collect());
        }
        let is_ts_sdk = params
            .client
            .as_ref()
            .is_some_and(|client| client.name.starts_with(TS_SDK_CLIENT));
        let knows_every_event =
            parse_version(&params.protocol_version).is_some_and(|version| version >= ALL_EVENTS_SINCE);
        if is_ts_sdk && !knows_every_event {
            return Self::only(TS_SDK_0_1_EVENTS);
        }
        Self::All
    }

    /// A filter letting `types` through.
    pub fn only(types: &[&str]) -> Self {
        Self::Only(types.iter().map(|t| (*t).to_owned()).collect())
    }

    /// Whether the client is sent `event`.
    pub fn allows(&self, event: &Event) -> bool {
        match event {
            Event::SubagentEvent(wrapped) => self.allows_type("SubagentEvent") && self.allows(&wrapped.event),
            other => self.allows_type(other.type_name()),
        }
    }

    /// Whether the client is sent events of type `name` (for a `SubagentEvent`, only the wrapper is
    /// judged here; see [`EventFilter::allows_event_line`]).
    pub fn allows_type(&self, name: &str) -> bool {
        match self {
            Self::All => true,
            Self::Only(types) => types.contains(name),
        }
    }

    /// Whether the client is sent the pre-serialized `event` notification `line` of type `kind`
    /// (replay's fast path). A `SubagentEvent` line is parsed only when the filter is restrictive.
    pub fn allows_event_line(&self, kind: &str, line: &str) -> bool {
        if !self.allows_type(kind) {
            return false;
        }
        if kind != "SubagentEvent" || matches!(self, Self::All) {
            return true;
        }
        let inner = serde_json::from_str::<serde_json::Value>(line)
            .ok()
            .and_then(|value| {
                value
                    .pointer("/params/payload/event/type")
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_owned)
            });
        inner.is_some_and(|inner| self.allows_type(&inner))
    }
}

/// `"1.7"` as `(1, 7)`; `None` when it is not two dot-separated numbers (a missing minor is 0).
fn parse_version(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.trim().split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = match parts.next() {
        Some(minor) => minor.parse().ok()?,
        None => 0,
    };
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::message::{MCPLoadingBegin, StepRetry, SubagentEvent, TurnEnd};

    fn params(value: serde_json::Value) -> InitializeParams {
        serde_json::from_value(value).unwrap()
    }

    fn step_retry() -> Event {
        Event::StepRetry(StepRetry {
            n: 1,
            next_attempt: 2,
            max_attempts: 3,
            wait_s: 0.5,
            error_type: "APIConnectionError".into(),
            status_code: None,
        })
    }

    fn wrapped(event: Event) -> Event {
        Event::SubagentEvent(SubagentEvent {
            parent_tool_call_id: Some("tc-1".into()),
            agent_id: Some("a12345678".into()),
            subagent_type: Some("coder".into()),
            event: Box::new(event),
        })
    }

    #[test]
    fn the_ts_sdk_gets_only_what_its_schema_parses() {
        let sdk = EventFilter::for_client(&params(json!({
            "protocol_version": "1.7",
            "client": {"name": "kimi-agent-sdk/0.1.8 kimi-code-for-vs-code/0.4.2", "version": "0.1.8"},
            "capabilities": {"supports_question": true, "supports_plan_mode": true}
        })));
        assert_eq!(sdk, EventFilter::only(TS_SDK_0_1_EVENTS));
        assert!(sdk.allows(&Event::TurnEnd(TurnEnd {})));
        assert!(!sdk.allows(&step_retry()));
        assert!(!sdk.allows(&Event::MCPLoadingBegin(MCPLoadingBegin {})));
        assert!(sdk.allows(&wrapped(Event::TurnEnd(TurnEnd {}))));
        assert!(
            !sdk.allows(&wrapped(step_retry())),
            "judged by the wrapped event too"
        );
    }

    #[test]
    fn other_clients_get_everything_as_from_the_reference() {
        for value in [
            json!({"protocol_version": "1.1"}),
            json!({"protocol_version": "1.7", "client": {"name": "my-ui", "version": "1.0"}}),
            // A later SDK that declares the current version is trusted to parse all of it.
            json!({"protocol_version": "1.10", "client": {"name": "kimi-agent-sdk/0.2.0"}}),
            json!({"protocol_version": "2", "client": {"name": "kimi-agent-sdk/1.0.0"}}),
        ] {
            assert_eq!(
                EventFilter::for_client(&params(value.clone())),
                EventFilter::All,
                "{value}"
            );
        }
        assert!(EventFilter::default().allows(&step_retry()), "before initialize");
    }

    #[test]
    fn a_declared_list_wins_and_the_wildcard_asks_for_everything() {
        let listed = EventFilter::for_client(&params(json!({
            "protocol_version": "1.7",
            "client": {"name": "kimi-agent-sdk/0.1.8"},
            "capabilities": {"events": ["TurnBegin", "StepRetry", "FutureEvent"]}
        })));
        assert!(listed.allows(&step_retry()));
        assert!(!listed.allows(&Event::TurnEnd(TurnEnd {})));
        let all = EventFilter::for_client(&params(json!({
            "protocol_version": "1.7",
            "client": {"name": "kimi-agent-sdk/0.1.8"},
            "capabilities": {"events": ["TurnBegin", "*"]}
        })));
        assert_eq!(all, EventFilter::All);
        let none = EventFilter::for_client(&params(json!({
            "protocol_version": "1.10", "capabilities": {"events": []}
        })));
        assert!(!none.allows(&Event::TurnEnd(TurnEnd {})));
    }

    #[test]
    fn replayed_lines_are_judged_like_events() {
        let sdk = EventFilter::only(TS_SDK_0_1_EVENTS);
        let line = |event: &Event| crate::jsonrpc::notification_line("event", event).unwrap();
        let inner_retry = line(&wrapped(step_retry()));
        let inner_end = line(&wrapped(Event::TurnEnd(TurnEnd {})));
        assert!(!sdk.allows_event_line("StepRetry", &line(&step_retry())));
        assert!(!sdk.allows_event_line("SubagentEvent", &inner_retry));
        assert!(sdk.allows_event_line("SubagentEvent", &inner_end));
        assert!(EventFilter::All.allows_event_line("SubagentEvent", &inner_retry));
    }

    #[test]
    fn versions_parse_as_major_and_minor() {
        assert_eq!(parse_version("1.10"), Some((1, 10)));
        assert_eq!(parse_version(" 1.7 "), Some((1, 7)));
        assert_eq!(parse_version("2"), Some((2, 0)));
        assert_eq!(parse_version("1.x"), None);
        assert_eq!(parse_version(""), None);
        assert!((1, 7) < ALL_EVENTS_SINCE && (1, 10) >= ALL_EVENTS_SINCE && (2, 0) >= ALL_EVENTS_SINCE);
    }
}
