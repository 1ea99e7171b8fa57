//! An MCP server's tool as one of ours (reference `MCPTool`): the raw MCP name, a description naming the
//! server, the MCP input schema as parameters, and a side effect that needs approval (`mcp:<tool>`). A
//! tool the server marks `readOnlyHint` is still approved but runs beside the step's other reads.

use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use kimi_llm::ToolSpec;
use kimi_wire::message::{DisplayBlock, ToolReturnValue};
use serde_json::Value;

use super::McpServer;
use crate::approval::ApprovalAsk;
use crate::toolset::{Access, CallContext, Plan, Tool};

/// A tool served by an MCP server.
pub struct McpTool {
    spec: ToolSpec,
    /// The server says the tool only reads (`readOnlyHint`): still approved (reference), but it runs
    /// beside other reads instead of alone.
    read_only: bool,
    server: Weak<McpServer>,
    validator: Option<jsonschema::Validator>,
    /// Whether the approval request shows the arguments (a `brief` block with their JSON).
    show_arguments: bool,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.spec.name)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    /// Wraps `tool` of `server` (called `server_name` in the configuration).
    pub(crate) fn new(
        server_name: &str,
        tool: &rmcp::model::Tool,
        server: Weak<McpServer>,
        show_arguments: bool,
    ) -> Self {
        let description = tool
            .description
            .as_deref()
            .filter(|d| !d.is_empty())
            .unwrap_or("No description provided.");
        let parameters = Value::Object((*tool.input_schema).clone());
        // Reference: arguments are checked against the schema before anything runs. A schema we cannot
        // compile is the server's business; the call then goes through unchecked.
        let validator = match jsonschema::validator_for(&parameters) {
            Ok(validator) => Some(validator),
            Err(e) => {
                tracing::warn!(server = server_name, tool = %tool.name, error = %e, "MCP tool schema not usable for validation");
                None
            }
        };
        Self {
            spec: ToolSpec {
                name: tool.name.to_string(),
                description: format!(
                    "This is an MCP (Model Context Protocol) tool from MCP server `{server_name}`.\n\n{description}"
                ),
                parameters,
            },
            read_only: tool
                .annotations
                .as_ref()
                .and_then(|a| a.read_only_hint)
                .unwrap_or(false),
            server,
            validator,
            show_arguments,
        }
    }
}

impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        _ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            if let Some(validator) = &self.validator
                && let Err(e) = validator.validate(&args)
            {
                return Err(ToolReturnValue::error(
                    "",
                    format!("Error validating JSON arguments: {e}"),
                    "Invalid arguments",
                ));
            }
            let arguments = match args {
                Value::Object(map) => map,
                _ => serde_json::Map::new(),
            };
            let name = self.spec.name.clone();
            let access = if self.read_only {
                Access::Read
            } else {
                Access::Change
            };
            // The reference shows no arguments; the user cannot judge a call without them.
            let display = if self.show_arguments {
                vec![DisplayBlock::Brief {
                    text: format!("Arguments: {}", Value::Object(arguments.clone())),
                }]
            } else {
                Vec::new()
            };
            let ask = ApprovalAsk {
                action: format!("mcp:{name}"),
                description: format!("Call MCP tool `{name}`."),
                display,
                writes: Vec::new(),
            };
            let run = Box::pin(async move {
                match self.server.upgrade() {
                    Some(server) => server.call(&name, arguments).await,
                    None => ToolReturnValue::error(
                        "",
                        "Error running tool: the MCP server has shut down",
                        "Tool runtime error",
                    ),
                }
            });
            Ok(Plan::side_effect(ask, run).with_access(access))
        })
    }
}
