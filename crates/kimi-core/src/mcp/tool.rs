//! An MCP server's tool as one of ours (reference `MCPTool`): the raw MCP name, a description naming the
//! server, the MCP input schema as parameters, and a side effect that needs approval (`mcp:<tool>`). A
//! tool the server marks `readOnlyHint` is still approved but runs beside the step's other reads.
//!
//! With `mcp_tool_names = "prefixed"` the model knows the tool as `mcp__<server>__<tool>` (seeds/003);
//! the server is still called with the tool's own name.

use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use kimi_llm::ToolSpec;
use kimi_wire::message::{DisplayBlock, ToolReturnValue};
use serde_json::Value;

use super::McpServer;
use crate::approval::ApprovalAsk;
use crate::config::McpToolNames;
use crate::toolset::{Access, CallContext, Plan, Tool};

/// A tool served by an MCP server.
pub struct McpTool {
    spec: ToolSpec,
    /// The tool's name on its server (the spec's name may carry the server's prefix).
    remote_name: String,
    /// The server says the tool only reads (`readOnlyHint`): still approved (reference), but it runs
    /// beside other reads instead of alone.
    read_only: bool,
    server: Weak<McpServer>,
    validator: Option<jsonschema::Validator>,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.spec.name)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    /// Wraps `tool` of `server` (called `server_name` in the configuration), named for the model as
    /// `names` says.
    pub(crate) fn new(
        server_name: &str,
        tool: &rmcp::model::Tool,
        server: Weak<McpServer>,
        names: McpToolNames,
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
            remote_name: tool.name.to_string(),
            spec: ToolSpec {
                name: model_name(names, server_name, &tool.name),
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
            let remote_name = self.remote_name.clone();
            let access = if self.read_only {
                Access::Read
            } else {
                Access::Change
            };
            // The user cannot judge a call without its arguments, but the reference shows none and its
            // clients match that: the approval runtime shows them to the clients that get details.
            let ask = ApprovalAsk {
                action: format!("mcp:{name}"),
                description: format!("Call MCP tool `{name}`."),
                display: Vec::new(),
                detail_display: vec![DisplayBlock::Brief {
                    text: format!("Arguments: {}", Value::Object(arguments.clone())),
                }],
                writes: Vec::new(),
            };
            let run = Box::pin(async move {
                match self.server.upgrade() {
                    Some(server) => server.call(&remote_name, arguments).await,
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

/// The name the model calls a server's tool by: its own, or `mcp__<server>__<tool>` with the server's
/// name reduced to the characters tool names may hold (`[A-Za-z0-9_-]`, others become `_`).
pub(crate) fn model_name(names: McpToolNames, server: &str, tool: &str) -> String {
    match names {
        McpToolNames::Plain => tool.to_owned(),
        McpToolNames::Prefixed => {
            let server: String = server
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            shorten(format!("mcp__{server}__{tool}"))
        }
    }
}

/// The longest tool name the model APIs accept (OpenAI's and Anthropic's limit).
const MAX_TOOL_NAME: usize = 64;

/// A prefixed name over [`MAX_TOOL_NAME`] is cut and ends with 8 hex digits of its whole form, so two
/// long names that share their start stay apart and a name is the same in every session.
fn shorten(name: String) -> String {
    if name.len() <= MAX_TOOL_NAME {
        return name;
    }
    let digest = format!("{:x}", md5::compute(name.as_bytes()));
    let mut cut = MAX_TOOL_NAME - 9;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}_{}", &name[..cut], &digest[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefixed_name_over_64_characters_is_cut_and_keeps_apart_from_its_neighbours() {
        let tool = "x".repeat(70);
        let a = model_name(McpToolNames::Prefixed, "server", &format!("{tool}_a"));
        let b = model_name(McpToolNames::Prefixed, "server", &format!("{tool}_b"));
        assert_eq!((a.len(), b.len()), (64, 64));
        assert!(a.starts_with("mcp__server__xxx"));
        assert_ne!(a, b);
        assert_eq!(
            a,
            model_name(McpToolNames::Prefixed, "server", &format!("{tool}_a"))
        );
        let short = model_name(McpToolNames::Prefixed, "s", &"y".repeat(56));
        assert_eq!(short.len(), 64);
        assert_eq!(short, format!("mcp__s__{}", "y".repeat(56)));
    }

    /// The plan of `tool`'s call with `{}` (the server is gone: planning does not reach it).
    async fn planned(tool: rmcp::model::Tool) -> Plan {
        let tool = Arc::new(McpTool::new("srv", &tool, Weak::new(), McpToolNames::Plain));
        let ctx = CallContext::new("tc-1", None, tokio_util::sync::CancellationToken::new());
        tool.plan(serde_json::json!({}), ctx).await.unwrap()
    }

    #[tokio::test]
    async fn only_a_tool_marked_read_only_runs_beside_reads_and_every_one_is_approved() {
        let tool = || rmcp::model::Tool::new("look", "d", Arc::new(serde_json::Map::new()));
        let hinted = |hint: bool| tool().annotate(rmcp::model::ToolAnnotations::new().read_only(hint));
        for (case, tool, access) in [
            ("readOnlyHint true", hinted(true), Access::Read),
            ("readOnlyHint false", hinted(false), Access::Change),
            (
                "annotations without the hint",
                tool().annotate(rmcp::model::ToolAnnotations::new()),
                Access::Change,
            ),
            ("no annotations", tool(), Access::Change),
        ] {
            let plan = planned(tool).await;
            assert_eq!(plan.access, access, "{case}");
            let ask = plan.effect.approval().expect(case);
            assert_eq!(ask.action, "mcp:look", "{case}");
        }
    }

    #[test]
    fn prefixed_names_carry_the_server() {
        assert_eq!(model_name(McpToolNames::Plain, "fs", "read"), "read");
        assert_eq!(model_name(McpToolNames::Prefixed, "fs", "read"), "mcp__fs__read");
        assert_eq!(
            model_name(McpToolNames::Prefixed, "my server.v2", "read"),
            "mcp__my_server_v2__read"
        );
    }
}
