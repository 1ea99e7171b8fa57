//! Argument checks that the reference leaves to pydantic (ranges, lengths, cross-field rules), with
//! messages shaped like pydantic's so the model reads the same explanation.
//!
//! Type errors and missing fields are caught earlier by [`kimi_core::parse_args`]. The checks
//! here report one problem at a time, and leave out pydantic's `[type=..., input_value=...]` trailer and
//! documentation link, which say nothing a model can act on.

use kimi_wire::message::ToolReturnValue;

/// `{"type": "integer"}` without the `format` schemars would add, as the reference's schema has it.
pub(crate) fn plain_integer(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "integer" })
}

/// `Error validating JSON arguments: 1 validation error for Params` followed by the field path (`loc`,
/// e.g. `todos.0.title`) and the problem, as pydantic prints a field error.
pub fn field_error(loc: &str, problem: &str) -> ToolReturnValue {
    invalid(&format!("{loc}\n  {problem}"))
}

/// A cross-field rule failed (pydantic's model-level `Value error, ...`).
pub fn value_error(problem: &str) -> ToolReturnValue {
    invalid(&format!("  Value error, {problem}"))
}

/// `Input should be greater than or equal to {min}`.
pub fn below_minimum(loc: &str, min: impl std::fmt::Display) -> ToolReturnValue {
    field_error(loc, &format!("Input should be greater than or equal to {min}"))
}

/// `Input should be less than or equal to {max}`.
pub fn above_maximum(loc: &str, max: impl std::fmt::Display) -> ToolReturnValue {
    field_error(loc, &format!("Input should be less than or equal to {max}"))
}

/// `String should have at least {min} character(s)`.
pub fn string_too_short(loc: &str, min: usize) -> ToolReturnValue {
    field_error(
        loc,
        &format!("String should have at least {min} {}", plural(min, "character")),
    )
}

/// `String should have at most {max} character(s)`.
pub fn string_too_long(loc: &str, max: usize) -> ToolReturnValue {
    field_error(
        loc,
        &format!("String should have at most {max} {}", plural(max, "character")),
    )
}

/// Checks a list length against `min..=max`, with pydantic's `too_short` / `too_long` messages.
pub fn check_len(loc: &str, len: usize, min: usize, max: usize) -> Result<(), ToolReturnValue> {
    if len < min {
        return Err(field_error(
            loc,
            &format!(
                "List should have at least {min} {} after validation, not {len}",
                plural(min, "item")
            ),
        ));
    }
    if len > max {
        return Err(field_error(
            loc,
            &format!(
                "List should have at most {max} {} after validation, not {len}",
                plural(max, "item")
            ),
        ));
    }
    Ok(())
}

/// Checks an integer field against `min..=max`, naming the parameter model as pydantic does (the
/// task tools' models are `TaskListParams`, `TaskOutputParams`, ...; the other tools' are `Params`).
pub fn check_range(model: &str, loc: &str, value: i64, min: i64, max: i64) -> Result<(), ToolReturnValue> {
    let problem = if value < min {
        format!("Input should be greater than or equal to {min}")
    } else if value > max {
        format!("Input should be less than or equal to {max}")
    } else {
        return Ok(());
    };
    Err(invalid_in(model, &format!("{loc}\n  {problem}")))
}

fn invalid(detail: &str) -> ToolReturnValue {
    invalid_in("Params", detail)
}

fn invalid_in(model: &str, detail: &str) -> ToolReturnValue {
    ToolReturnValue::error(
        "",
        format!("Error validating JSON arguments: 1 validation error for {model}\n{detail}"),
        "Invalid arguments",
    )
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        word.to_owned()
    } else {
        format!("{word}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn messages_follow_pydantic() {
        assert_eq!(
            below_minimum("timeout", 1).message,
            "Error validating JSON arguments: 1 validation error for Params\ntimeout\n  Input should be greater than or equal to 1"
        );
        assert_eq!(
            value_error("x is wrong").message,
            "Error validating JSON arguments: 1 validation error for Params\n  Value error, x is wrong"
        );
        assert_eq!(
            check_len("questions", 0, 1, 4).unwrap_err().message,
            "Error validating JSON arguments: 1 validation error for Params\nquestions\n  List should have at least 1 item after validation, not 0"
        );
        assert_eq!(
            check_len("q.0.options", 5, 2, 4).unwrap_err().message,
            "Error validating JSON arguments: 1 validation error for Params\nq.0.options\n  List should have at most 4 items after validation, not 5"
        );
        assert!(check_len("x", 2, 2, 4).is_ok());
        assert_eq!(
            check_range("TaskListParams", "limit", 0, 1, 100)
                .unwrap_err()
                .message,
            "Error validating JSON arguments: 1 validation error for TaskListParams\nlimit\n  Input should be greater than or equal to 1"
        );
        assert_eq!(
            check_range("TaskOutputParams", "timeout", 3601, 0, 3600)
                .unwrap_err()
                .message,
            "Error validating JSON arguments: 1 validation error for TaskOutputParams\ntimeout\n  Input should be less than or equal to 3600"
        );
        assert!(check_range("M", "x", 5, 1, 5).is_ok());
        assert_eq!(string_too_short("t", 1).brief(), "Invalid arguments");
    }
}
