//! `Edit` (seeds/002): one exact replacement, `old_string` by `new_string` (`replace_all` for every
//! occurrence), served by StrReplaceFile: the same matching, ambiguity and no-op errors, diff and
//! approval. Its messages name seeds/002's parameters.

use std::sync::Arc;

use kimi_core::{Tool, parse_args};
use kimi_wire::message::ToolReturnValue;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::adapter::Adapted;

// Parameters of `Edit` (field doc comments are the parameter descriptions).
#[derive(Debug, Deserialize, JsonSchema)]
struct EditArgs {
    /// The file to edit. Relative paths start at the working directory; files outside it need an absolute path.
    path: String,
    /// The exact text to replace, whitespace and indentation included; it may span several lines.
    old_string: String,
    /// The text to put in its place; it must differ from `old_string`.
    new_string: String,
    /// Replace every occurrence of `old_string` instead of exactly one.
    #[serde(default)]
    replace_all: bool,
}

/// `Edit` over `str_replace_file`.
pub(crate) fn edit(str_replace_file: Arc<dyn Tool>) -> Adapted {
    let spec = crate::tool_spec::<EditArgs>("Edit", include_str!("descriptions/edit.md"));
    Adapted::new(str_replace_file, spec)
        .args(|args: Value| {
            let args: EditArgs = parse_args(args)?;
            Ok(json!({
                "path": args.path,
                "edit": {"old": args.old_string, "new": args.new_string, "replace_all": args.replace_all},
            }))
        })
        .result(in_edit_words)
}

/// StrReplaceFile's messages name its `old` and `new`; Edit's model knows them as `old_string` and
/// `new_string`.
fn in_edit_words(mut value: ToolReturnValue) -> ToolReturnValue {
    if value.message.contains("`old`") || value.message.contains("`new`") {
        value.message = value
            .message
            .replace("`old`", "`old_string`")
            .replace("`new`", "`new_string`");
    }
    value
}
