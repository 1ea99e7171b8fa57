//! Structured questions for the user (server to client) and the client's answers.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// A request to ask the user one or more multiple-choice questions. Sent only to clients that
/// declared `supports_question`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct QuestionRequest {
    /// The request id; it is also the JSON-RPC id of the `request` message.
    pub id: String,
    /// The tool call that asks.
    pub tool_call_id: String,
    /// The questions, usually one to four.
    pub questions: Vec<QuestionItem>,
}

/// One question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct QuestionItem {
    /// The full question text; answers are keyed by it.
    pub question: String,
    /// A short tag shown with the question (about 12 characters).
    #[serde(default)]
    pub header: String,
    /// The choices, usually two to four.
    pub options: Vec<QuestionOption>,
    /// Whether several options may be chosen.
    #[serde(default)]
    pub multi_select: bool,
    /// Markdown shown above the options; may be empty.
    #[serde(default)]
    pub body: String,
    /// Label of the free-text "other" choice; empty means the client's default.
    #[serde(default)]
    pub other_label: String,
    /// Description of the free-text "other" choice; empty means the client's default.
    #[serde(default)]
    pub other_description: String,
}

/// One choice of a question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct QuestionOption {
    /// The text of the choice; it is what the answer contains.
    pub label: String,
    /// What choosing it means; may be empty.
    #[serde(default)]
    pub description: String,
}

/// The client's answer to a [`QuestionRequest`] (the reference's `QuestionResponse`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct QuestionAnswer {
    /// The id of the answered request.
    pub request_id: String,
    /// Question text to the chosen label; several labels are joined with commas. An empty map
    /// means the user dismissed the questions.
    pub answers: IndexMap<String, String>,
}
