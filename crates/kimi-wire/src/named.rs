//! Reading client JSON into typed values by field name only.
//!
//! serde's derived `Deserialize` also accepts a struct written as an array of its field values in
//! declaration order (`[true]` for `{"enabled": true}`), and an internally tagged enum as an array whose
//! first element is the tag. The reference (pydantic models) rejects both, and so must we: a client that
//! sends an array where an object belongs has a bug, and quietly running a turn on it hides that.
//!
//! Rather than hand-writing `Deserialize` for every inbound type, [`from_value_named`] parses as usual,
//! serializes the result back and compares shapes: wherever the input holds an array and the typed value
//! an object, the input was positional and is refused. Values that hold free-form JSON (`Value`) come back
//! unchanged, so they never differ in shape.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Why client JSON was refused.
#[derive(Debug, thiserror::Error)]
pub enum NamedError {
    /// The JSON does not fit the type at `path` (a JSON path, `$` for the value itself).
    #[error("{source} at {path}")]
    Invalid {
        /// Where the first field that does not fit is.
        path: String,
        /// Why it does not fit.
        source: serde_json::Error,
    },
    /// An object was given as an array of its field values, at this JSON path.
    #[error("an object was given as an array at {0}")]
    Positional(String),
}

impl NamedError {
    /// The JSON path of the first field that does not fit (`$.user_input[0].type`; `$` for the
    /// value itself). A missing field is named by the path it should have had.
    pub fn path(&self) -> String {
        match self {
            Self::Invalid { path, .. } | Self::Positional(path) => path.clone(),
        }
    }

    /// Why the value was refused, in serde's words (`missing field `x``, `invalid type: ...`).
    pub fn reason(&self) -> String {
        match self {
            Self::Invalid { source, .. } => {
                // serde_json appends " at line L column C", meaningless for a value already parsed.
                let text = source.to_string();
                match text.rfind(" at line ") {
                    Some(at) if source.line() > 0 => text[..at].to_owned(),
                    _ => text,
                }
            }
            Self::Positional(_) => "an object was given as an array of its field values".to_owned(),
        }
    }
}

/// Deserializes `value` like `serde_json::from_value`, but refuses objects given positionally.
pub fn from_value_named<T: DeserializeOwned + Serialize>(value: &Value) -> Result<T, NamedError> {
    let parsed: T = serde_path_to_error::deserialize(value).map_err(|e| {
        let mut path = json_path(e.path());
        let source = e.into_inner();
        // serde reports a missing field at the object that lacks it; name the field itself.
        if let Some(field) = missing_field(&source.to_string()) {
            push_key(&mut path, field);
        }
        NamedError::Invalid { path, source }
    })?;
    // Only input with an array in it can have been read positionally; most params (a text prompt) have none.
    if has_array(value) {
        let typed = serde_json::to_value(&parsed).map_err(|source| NamedError::Invalid {
            path: "$".to_owned(),
            source,
        })?;
        if let Some(path) = positional_at(value, &typed, &mut "$".to_owned()) {
            return Err(NamedError::Positional(path));
        }
    }
    Ok(parsed)
}

/// `$`, then `.key` or `[index]` per step (`['odd key']` for keys that are not plain names).
fn json_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = "$".to_owned();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => push_key(&mut out, key),
            Segment::Unknown => {}
        }
    }
    out
}

fn push_key(path: &mut String, key: &str) {
    let plain = !key.is_empty()
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !key.starts_with(|c: char| c.is_ascii_digit());
    if plain {
        path.push('.');
        path.push_str(key);
    } else {
        path.push_str(&format!("[{}]", serde_json::Value::String(key.to_owned())));
    }
}

/// The field named by serde's "missing field `x`" message.
fn missing_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("missing field `")?;
    rest.split_once('`').map(|(field, _)| field)
}

fn has_array(value: &Value) -> bool {
    match value {
        Value::Array(_) => true,
        Value::Object(map) => map.values().any(has_array),
        _ => false,
    }
}

/// The JSON path of the first place where `input` has an array and `typed` an object.
fn positional_at(input: &Value, typed: &Value, path: &mut String) -> Option<String> {
    match (input, typed) {
        (Value::Array(_), Value::Object(_)) => Some(path.clone()),
        (Value::Array(items), Value::Array(typed_items)) => items
            .iter()
            .zip(typed_items)
            .enumerate()
            .find_map(|(i, (item, typed_item))| {
                descend(
                    path,
                    |path| path.push_str(&format!("[{i}]")),
                    |path| positional_at(item, typed_item, path),
                )
            }),
        (Value::Object(map), Value::Object(typed_map)) => map.iter().find_map(|(key, item)| {
            let typed_item = typed_map.get(key)?;
            descend(
                path,
                |path| push_key(path, key),
                |path| positional_at(item, typed_item, path),
            )
        }),
        _ => None,
    }
}

fn descend(
    path: &mut String,
    step: impl FnOnce(&mut String),
    f: impl FnOnce(&mut String) -> Option<String>,
) -> Option<String> {
    let len = path.len();
    step(path);
    let found = f(path);
    path.truncate(len);
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{InitializeParams, PromptParams, SetPlanModeParams};
    use serde_json::json;

    #[test]
    fn objects_by_name_are_read() {
        let params: SetPlanModeParams = from_value_named(&json!({"enabled": true})).unwrap();
        assert!(params.enabled);
        let prompt: PromptParams = from_value_named(&json!({"user_input": [
            {"type": "text", "text": "a"},
            {"type": "image_url", "image_url": {"url": "data:,", "id": null}},
        ]}))
        .unwrap();
        assert_eq!(prompt.user_input.to_parts().len(), 2);
        // Free-form JSON keeps its arrays.
        let init: InitializeParams = from_value_named(&json!({
            "protocol_version": "1.10",
            "external_tools": [{"name": "t", "parameters": {"type": "object", "required": ["a"]}}],
        }))
        .unwrap();
        assert_eq!(init.external_tools.map(|t| t.len()), Some(1));
    }

    #[test]
    fn positional_objects_are_refused_at_any_depth() {
        for (value, path) in [
            (json!([true]), "$"),
            (json!({"user_input": [["text", "hi"]]}), "$.user_input[0]"),
            (
                json!({"user_input": [{"type": "image_url", "image_url": ["data:,", null]}]}),
                "$.user_input[0].image_url",
            ),
        ] {
            let error = match value.get("user_input") {
                Some(_) => from_value_named::<PromptParams>(&value).map(drop),
                None => from_value_named::<SetPlanModeParams>(&value).map(drop),
            };
            match error {
                Err(NamedError::Positional(at)) => assert_eq!(at, path, "{value}"),
                other => panic!("{value}: {other:?}"),
            }
        }
        let client = json!({"protocol_version": "1.10", "client": ["c", "1"]});
        assert!(matches!(
            from_value_named::<InitializeParams>(&client),
            Err(NamedError::Positional(_))
        ));
    }

    #[test]
    fn invalid_params_name_the_first_bad_field() {
        let rows: [(Value, &str, &str); 5] = [
            (json!({}), "$.user_input", "missing field `user_input`"),
            (
                json!(null),
                "$",
                "invalid type: null, expected struct PromptParams",
            ),
            (
                json!({"user_input": [{"type": "text", "text": 1}]}),
                "$.user_input[0]",
                "invalid type: integer `1`, expected a string",
            ),
            (json!({"user_input": "hi", "x": 1}), "", ""),
            (json!({"user_input": 5}), "$.user_input", ""),
        ];
        for (value, path, reason) in rows {
            match from_value_named::<PromptParams>(&value) {
                Ok(_) => assert!(path.is_empty(), "{value} was accepted"),
                Err(e) => {
                    assert_eq!(e.path(), path, "{value}: {e}");
                    if !reason.is_empty() {
                        assert_eq!(e.reason(), reason, "{value}");
                    }
                }
            }
        }
        let error = from_value_named::<SetPlanModeParams>(&json!({"enabled": "yes"})).unwrap_err();
        assert_eq!(error.path(), "$.enabled");
        assert_eq!(error.reason(), "invalid type: string \"yes\", expected a boolean");
    }
}
