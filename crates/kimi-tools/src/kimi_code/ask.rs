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
    if let Some(header) = header_schema(&mut spec.parameters) {
        header["maxLength"] = MAX_HEADER_CHARS.into();
        header["description"] =
            format!("A short tag for the question, at most {MAX_HEADER_CHARS} characters (e.g. \"Database\", \"Naming\").")
                .into();
    }
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

/// The schema of a question's `header` in the shared tool's parameters.
fn header_schema(parameters: &mut Value) -> Option<&mut Value> {
    parameters
        .pointer_mut("/$defs/QuestionArg/properties/header")
        .filter(|header| header.is_object())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_schema_has_the_header_this_profile_limits() {
        let mut parameters = crate::ask_user::spec().parameters;
        assert!(header_schema(&mut parameters).is_some(), "{parameters}");
    }
}
