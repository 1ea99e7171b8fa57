//! Tools the wire client registers at `initialize` and runs itself: each call becomes a
//! `ToolCallRequest` and waits for the client's `ToolResult` (reference `WireExternalTool`).

use std::sync::Arc;

use futures::future::BoxFuture;
use kimi_llm::ToolSpec;
use kimi_wire::message::{ToolCallRequest, ToolReturnValue};
use kimi_wire::{Abandoned, NoAnswer, RequestScope};
use serde_json::Value;

use super::tool::{Access, CallContext, Plan, Tool};
use crate::events::EventSink;

/// Why an external tool's parameter schema was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SchemaError(pub String);

/// A client-side tool.
#[derive(Debug)]
pub struct ExternalTool {
    spec: ToolSpec,
    events: EventSink,
}

impl ExternalTool {
    /// Validates `parameters` as a JSON Schema (draft 2020-12 meta-schema) and builds the tool.
    pub fn new(
        name: &str,
        description: &str,
        parameters: Value,
        events: EventSink,
    ) -> Result<Self, SchemaError> {
        if !parameters.is_object() {
            return Err(SchemaError(format!("{parameters} is not of type 'object'")));
        }
        if let Err(e) = jsonschema::meta::validate(&parameters) {
            return Err(SchemaError(e.to_string()));
        }
        let description = if description.is_empty() {
            "No description provided.".to_owned()
        } else {
            description.to_owned()
        };
        Ok(Self {
            spec: ToolSpec {
                name: name.to_owned(),
                description,
                parameters,
            },
            events,
        })
    }
}

impl Tool for ExternalTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        _args: Value,
        ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            let run = Box::pin(async move { self.call_client(ctx).await });
            // The client decides what its tool may do; nothing to approve on our side. But it may change
            // anything, so it runs alone, in the model's order.
            Ok(Plan::read_only(run).with_access(Access::Change))
        })
    }

    fn is_external(&self) -> bool {
        true
    }
}

impl ExternalTool {
    async fn call_client(&self, ctx: CallContext) -> ToolReturnValue {
        let request = ToolCallRequest {
            id: ctx.tool_call_id.clone(),
            name: self.spec.name.clone(),
            arguments: ctx.raw_arguments.clone(),
        };
        match self.events.ask(request, RequestScope::Turn).await {
            Ok(result) => {
                if result.tool_call_id != ctx.tool_call_id {
                    tracing::warn!(
                        expected = ctx.tool_call_id,
                        got = result.tool_call_id,
                        "tool result id mismatch"
                    );
                }
                result.return_value
            }
            Err(NoAnswer::Malformed(e)) => {
                tracing::warn!(error = %e, "malformed tool result from client");
                ToolReturnValue::error(
                    "",
                    "Invalid tool result payload from client.",
                    "Invalid tool result",
                )
            }
            Err(NoAnswer::Error(error)) => ToolReturnValue::error("", error.message, "External tool error"),
            Err(NoAnswer::Abandoned(Abandoned::TurnEnded)) => ToolReturnValue::error(
                "",
                "Agent turn ended before tool result was received.",
                "Turn ended",
            ),
            Err(NoAnswer::NotSent(e)) => {
                tracing::warn!(error = %e, "tool call request not sent");
                wire_closed()
            }
            Err(NoAnswer::Abandoned(Abandoned::ConnectionClosed)) => wire_closed(),
        }
    }
}

/// What the model gets when the client went away before answering (reference text).
fn wire_closed() -> ToolReturnValue {
    ToolReturnValue::error(
        "",
        "Wire connection closed before tool result was received.",
        "Wire closed",
    )
}
