//! Requests: messages the server sends with `method: "request"` and for which it awaits the
//! client's answer.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::approval::{ApprovalAnswer, ApprovalRequest};
use super::hook::{HookAnswer, HookRequest};
use super::question::{QuestionAnswer, QuestionRequest};
use super::tool::{ToolCall, ToolResult};

/// One kind of request the server sends, paired with the type the client answers it with (as codex's
/// app-server pairs each request with its response), so an asker gets the answer typed
/// (`ClientHandle::ask`) and no kind parses its answer by hand.
pub trait ClientRequest: Clone + Into<Request> + Send + 'static {
    /// What the client's `result` must be.
    type Answer: DeserializeOwned + Serialize + JsonSchema + Send + 'static;
}

impl ClientRequest for ApprovalRequest {
    type Answer = ApprovalAnswer;
}

impl ClientRequest for ToolCallRequest {
    type Answer = ToolResult;
}

impl ClientRequest for QuestionRequest {
    type Answer = QuestionAnswer;
}

impl ClientRequest for HookRequest {
    type Answer = HookAnswer;
}

/// Everything the server asks of the client. The JSON-RPC id of the `request` message is always the
/// payload's own `id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(tag = "type", content = "payload")]
pub enum Request {
    /// Ask the user to allow an action. Answered with an `ApprovalAnswer`.
    ApprovalRequest(ApprovalRequest),
    /// Run a client-provided (external) tool. Answered with a `ToolResult`.
    ToolCallRequest(ToolCallRequest),
    /// Ask the user structured questions. Answered with a `QuestionAnswer`.
    QuestionRequest(QuestionRequest),
    /// Run the client's hook logic. Answered with a `HookAnswer`.
    HookRequest(HookRequest),
}

impl Request {
    /// The request id, which is also the JSON-RPC id.
    pub fn id(&self) -> &str {
        match self {
            Self::ApprovalRequest(request) => &request.id,
            Self::ToolCallRequest(request) => &request.id,
            Self::QuestionRequest(request) => &request.id,
            Self::HookRequest(request) => &request.id,
        }
    }

    /// The wire type name (the envelope's `type`).
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::ApprovalRequest(_) => "ApprovalRequest",
            Self::ToolCallRequest(_) => "ToolCallRequest",
            Self::QuestionRequest(_) => "QuestionRequest",
            Self::HookRequest(_) => "HookRequest",
        }
    }
}

/// A call of an external tool (one the client registered in `initialize`), for the client to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct ToolCallRequest {
    /// The model's tool-call id; the answer's `tool_call_id` should repeat it.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The arguments as a JSON text, as the model produced them.
    #[serde(default)]
    pub arguments: Option<String>,
}

impl From<&ToolCall> for ToolCallRequest {
    fn from(call: &ToolCall) -> Self {
        Self {
            id: call.id.clone(),
            name: call.function.name.clone(),
            arguments: call.function.arguments.clone(),
        }
    }
}

impl From<ApprovalRequest> for Request {
    fn from(request: ApprovalRequest) -> Self {
        Self::ApprovalRequest(request)
    }
}

impl From<ToolCallRequest> for Request {
    fn from(request: ToolCallRequest) -> Self {
        Self::ToolCallRequest(request)
    }
}

impl From<QuestionRequest> for Request {
    fn from(request: QuestionRequest) -> Self {
        Self::QuestionRequest(request)
    }
}

impl From<HookRequest> for Request {
    fn from(request: HookRequest) -> Self {
        Self::HookRequest(request)
    }
}
