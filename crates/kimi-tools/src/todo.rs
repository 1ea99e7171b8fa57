//! `SetTodoList`: replaces or reads the session's todo list (reference `kimi_cli/tools/todo`).
//!
//! With `todos` the whole list is replaced and shown to the client as a `todo` display block; without it
//! (or with `null`) the current list comes back as text. The list lives in
//! [`kimi_core::SessionState`]; writing it to `state.json` is the session's job.

use std::sync::Arc;

use futures::future::BoxFuture;
use kimi_core::SessionState;
use kimi_core::{CallContext, Plan, Tool, parse_args};
use kimi_llm::ToolSpec;
use kimi_wire::message::{DisplayBlock, TodoDisplayItem, TodoStatus, ToolReturnValue};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::args;

/// The tool's name.
pub const NAME: &str = "SetTodoList";

/// Output and message of a successful update (reference text).
const UPDATED: &str = "Todo list updated";

// Parameters of `SetTodoList` (plain comments on the types: doc comments would become schema
// descriptions).
#[derive(Debug, Deserialize, JsonSchema)]
struct TodoArgs {
    /// The complete new list, replacing the old one. Leave it out to read the current list unchanged.
    #[serde(default)]
    #[schemars(schema_with = "list_or_null")]
    todos: Option<Vec<TodoArg>>,
}

/// The reference's shape for an optional list: `anyOf` the list or `null`, defaulting to `null`.
fn list_or_null(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let list = generator.subschema_for::<Vec<TodoArg>>();
    schemars::json_schema!({ "anyOf": [list, { "type": "null" }], "default": null })
}

// One item of the list.
#[derive(Debug, Deserialize, JsonSchema)]
struct TodoArg {
    /// What the item is about.
    #[schemars(length(min = 1))]
    title: String,
    /// Where the item stands.
    status: Status,
}

// A local copy of the status values, so the schema shows a plain string enum as the reference's does.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Status {
    Pending,
    InProgress,
    Done,
}

impl From<Status> for TodoStatus {
    fn from(status: Status) -> Self {
        match status {
            Status::Pending => Self::Pending,
            Status::InProgress => Self::InProgress,
            Status::Done => Self::Done,
        }
    }
}

/// The `SetTodoList` tool.
#[derive(Debug)]
pub struct SetTodoList {
    spec: ToolSpec,
    state: Arc<SessionState>,
}

impl SetTodoList {
    /// A `SetTodoList` keeping its list in `state`.
    pub fn new(state: Arc<SessionState>) -> Self {
        Self {
            spec: crate::tool_spec::<TodoArgs>(NAME, include_str!("descriptions/set_todo_list.md")),
            state,
        }
    }

    fn make_plan(self: Arc<Self>, args: Value) -> Result<Plan, ToolReturnValue> {
        let args: TodoArgs = parse_args(args)?;
        let items = match args.todos {
            None => None,
            Some(todos) => Some(validate(todos)?),
        };
        Ok(match items {
            None => Plan::read_only(Box::pin(async move { self.read() })),
            // The list is session state: a failed attempt must not change it.
            Some(items) => Plan::interactive(Box::pin(async move { self.write(items) })),
        })
    }

    fn write(&self, items: Vec<TodoDisplayItem>) -> ToolReturnValue {
        self.state.set_todos(items.clone());
        ToolReturnValue {
            display: vec![DisplayBlock::Todo { items }],
            ..ToolReturnValue::ok(UPDATED, UPDATED)
        }
    }

    fn read(&self) -> ToolReturnValue {
        let todos = self.state.todos();
        if todos.is_empty() {
            return ToolReturnValue::ok("Todo list is empty.", "");
        }
        let mut text = String::from("Current todo list:");
        for todo in &todos {
            text.push_str(&format!("\n- [{}] {}", status_name(todo.status), todo.title));
        }
        ToolReturnValue::ok(text, "")
    }
}

impl Tool for SetTodoList {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        _ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move { self.make_plan(args) })
    }
}

fn validate(todos: Vec<TodoArg>) -> Result<Vec<TodoDisplayItem>, ToolReturnValue> {
    todos
        .into_iter()
        .enumerate()
        .map(|(i, todo)| {
            if todo.title.is_empty() {
                return Err(args::string_too_short(&format!("todos.{i}.title"), 1));
            }
            Ok(TodoDisplayItem {
                title: todo.title,
                status: todo.status.into(),
            })
        })
        .collect()
}

/// The wire spelling of a status, as the reference prints it.
fn status_name(status: TodoStatus) -> &'static str {
    match status {
        TodoStatus::Pending => "pending",
        TodoStatus::InProgress => "in_progress",
        TodoStatus::Done => "done",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kimi_core::{Access, Effect};
    use pretty_assertions::assert_eq;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    fn tool(state: &Arc<SessionState>) -> Arc<SetTodoList> {
        Arc::new(SetTodoList::new(Arc::clone(state)))
    }

    async fn call(tool: &Arc<SetTodoList>, args: Value) -> ToolReturnValue {
        let ctx = CallContext::new("tc-1", None, CancellationToken::new());
        // Reading the list is a read; setting it waits for the model's whole answer.
        let access = if args.get("todos").is_none_or(Value::is_null) {
            Access::Read
        } else {
            Access::Interact
        };
        match Arc::clone(tool).plan(args, ctx).await {
            Ok(plan) => {
                assert_eq!((plan.effect, plan.access), (Effect::ReadOnly, access));
                plan.run.await
            }
            Err(value) => value,
        }
    }

    fn item(title: &str, status: TodoStatus) -> TodoDisplayItem {
        TodoDisplayItem {
            title: title.into(),
            status,
        }
    }

    #[tokio::test]
    async fn update_stores_the_list_and_shows_it() {
        let state = Arc::new(SessionState::default());
        let tool = tool(&state);
        let value = call(
            &tool,
            json!({"todos": [{"title": "one", "status": "pending"}, {"title": "two", "status": "in_progress"}]}),
        )
        .await;
        let items = vec![
            item("one", TodoStatus::Pending),
            item("two", TodoStatus::InProgress),
        ];
        assert_eq!(
            serde_json::to_value(&value).unwrap(),
            json!({
                "is_error": false,
                "output": "Todo list updated",
                "message": "Todo list updated",
                "display": [{"type": "todo", "items": [
                    {"title": "one", "status": "pending"},
                    {"title": "two", "status": "in_progress"}
                ]}],
                "extras": null
            })
        );
        assert_eq!(state.todos(), items);
    }

    #[tokio::test]
    async fn query_returns_the_current_list() {
        let state = Arc::new(SessionState::default());
        let tool = tool(&state);
        assert_eq!(
            call(&tool, json!({})).await,
            ToolReturnValue::ok("Todo list is empty.", "")
        );
        state.set_todos(vec![
            item("a", TodoStatus::Done),
            item("b", TodoStatus::InProgress),
        ]);
        let expected = ToolReturnValue::ok("Current todo list:\n- [done] a\n- [in_progress] b", "");
        assert_eq!(call(&tool, json!({"todos": null})).await, expected);
        assert_eq!(state.todos().len(), 2);
    }

    #[tokio::test]
    async fn an_empty_list_clears() {
        let state = Arc::new(SessionState::new(vec![item("a", TodoStatus::Pending)]));
        let tool = tool(&state);
        let value = call(&tool, json!({"todos": []})).await;
        assert_eq!(value.display, vec![DisplayBlock::Todo { items: Vec::new() }]);
        assert!(state.todos().is_empty());
    }

    #[tokio::test]
    async fn bad_items_are_rejected_and_leave_the_list_alone() {
        let state = Arc::new(SessionState::new(vec![item("keep", TodoStatus::Pending)]));
        let tool = tool(&state);
        let value = call(
            &tool,
            json!({"todos": [{"title": "ok", "status": "done"}, {"title": "", "status": "pending"}]}),
        )
        .await;
        assert_eq!(
            value,
            ToolReturnValue::error(
                "",
                "Error validating JSON arguments: 1 validation error for Params\ntodos.1.title\n  String should have at least 1 character",
                "Invalid arguments"
            )
        );
        let bad_status = call(&tool, json!({"todos": [{"title": "x", "status": "bogus"}]})).await;
        assert!(bad_status.is_error);
        assert!(
            bad_status
                .message
                .starts_with("Error validating JSON arguments: "),
            "{}",
            bad_status.message
        );
        assert_eq!(state.todos(), vec![item("keep", TodoStatus::Pending)]);
    }

    #[test]
    fn schema_lists_the_statuses() {
        let tool = tool(&Arc::new(SessionState::default()));
        let todos = &tool.spec().parameters["properties"]["todos"];
        assert_eq!(todos["anyOf"][1], json!({"type": "null"}));
        assert_eq!(todos["default"], Value::Null);
        assert_eq!(todos["anyOf"][0]["items"]["required"], json!(["title", "status"]));
        let text = todos.to_string();
        assert!(
            text.contains(r#""enum":["pending","in_progress","done"]"#),
            "{text}"
        );
        assert!(text.contains(r#""minLength":1"#), "{text}");
        assert!(tool.spec().parameters.get("required").is_none());
    }
}
