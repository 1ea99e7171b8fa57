//! `AskUserQuestion` (seeds/002): the shared tool, with a question's `header` held to seeds/002's 12
//! characters, which the shared tool (like the reference) only suggests.

use std::sync::Arc;

use kimi_core::Tool;
use serde_json::Value;

use super::adapter::Adapted;
use crate::args;

/// Longest `header` (seeds/002: "最多 12 字符").
const MAX_HEADER_CHARS: usize = 12;

/// seeds/002's `AskUserQuestion` over the shared one.
pub(crate) fn ask_user_question(inner: Arc<dyn Tool>) -> Adapted {
    let mut spec = inner.spec().clone();
    limit_header(&mut spec.parameters);
    Adapted::new(inner, spec).args(|args: Value| {
        let questions = args.get("questions").and_then(Value::as_array);
        for (i, question) in questions.into_iter().flatten().enumerate() {
            let header = question.get("header").and_then(Value::as_str).unwrap_or_default();
            if header.chars().count() > MAX_HEADER_CHARS {
                return Err(args::string_too_long(
                    &format!("questions.{i}.header"),
                    MAX_HEADER_CHARS,
                ));
            }
        }
        Ok(args)
    })
}

/// The shared tool's parameters with a question's `header` held to [`MAX_HEADER_CHARS`].
fn limit_header(parameters: &mut Value) {
    let header = parameters
        .pointer_mut("/properties/questions/items/properties/header")
        .filter(|header| header.is_object());
    if let Some(header) = header {
        header["maxLength"] = MAX_HEADER_CHARS.into();
        header["description"] = format!(
            "A short tag for the question, at most {MAX_HEADER_CHARS} characters (e.g. \"Database\", \"Naming\")."
        )
        .into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_holds_the_header_to_twelve_characters() {
        let mut parameters = crate::ask_user::spec().parameters;
        limit_header(&mut parameters);
        let header = &parameters["properties"]["questions"]["items"]["properties"]["header"];
        assert_eq!(header["maxLength"], 12, "{parameters}");
        assert_eq!(
            header["description"],
            "A short tag for the question, at most 12 characters (e.g. \"Database\", \"Naming\")."
        );
    }
}
