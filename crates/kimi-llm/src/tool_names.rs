//! Tool names as an API accepts them, and the way back.
//!
//! APIs restrict tool names (Moonshot, OpenAI and Anthropic to `[A-Za-z0-9_-]`, Gemini to names
//! starting with a letter or `_`), while MCP servers name tools freely. Each request renames what it
//! must with [`sanitize_tool_name`] and maps the names the model calls back to ours, so the loop only
//! ever sees its own names.

use std::collections::HashMap;

use crate::ToolSpec;
use crate::schema_sanitize::sanitize_tool_name;

/// The renamings of one request's tools.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ToolNames {
    to_wire: HashMap<String, String>,
    to_ours: HashMap<String, String>,
}

impl ToolNames {
    /// The renamings `tools` need; names already acceptable are not recorded.
    pub(crate) fn new(tools: &[ToolSpec]) -> Self {
        let mut names = Self::default();
        for tool in tools {
            let wire = sanitize_tool_name(&tool.name);
            if wire != tool.name.as_str() {
                names.to_ours.insert(wire.clone().into_owned(), tool.name.clone());
                names.to_wire.insert(tool.name.clone(), wire.into_owned());
            }
        }
        names
    }

    /// The name the API knows `ours` by.
    pub(crate) fn wire<'a>(&'a self, ours: &'a str) -> &'a str {
        self.to_wire.get(ours).map_or(ours, String::as_str)
    }

    /// Our name for the tool the API calls `wire`.
    pub(crate) fn ours<'a>(&'a self, wire: &'a str) -> &'a str {
        self.to_ours.get(wire).map_or(wire, String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_names_that_need_it_are_renamed_and_map_back() {
        let tool = |name: &str| ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        };
        let names = ToolNames::new(&[tool("ReadFile"), tool("1password"), tool("mcp:x.y")]);
        assert_eq!(names.wire("ReadFile"), "ReadFile");
        assert_eq!(names.wire("1password"), "_1password");
        assert_eq!(names.wire("mcp:x.y"), "mcp_x_y");
        assert_eq!(names.ours("_1password"), "1password");
        assert_eq!(names.ours("mcp_x_y"), "mcp:x.y");
        assert_eq!(names.ours("Unknown"), "Unknown");
    }
}
