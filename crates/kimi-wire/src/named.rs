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
    /// The JSON does not fit the type.
    #[error(transparent)]
    Invalid(#[from] serde_json::Error),
    /// An object was given as an array of its field values.
    #[error("an object was given as an array at {0}")]
    Positional(String),
}

/// Deserializes `value` like `serde_json::from_value`, but refuses objects given positionally.
pub fn from_value_named<T: DeserializeOwned + Serialize>(value: &Value) -> Result<T, NamedError> {
    let parsed = T::deserialize(value)?;
    // Only input with an array in it can have been read positionally; most params (a text prompt) have none.
    if has_array(value) {
        let typed = serde_json::to_value(&parsed)?;
        if let Some(path) = positional_at(value, &typed, &mut String::new()) {
            return Err(NamedError::Positional(path));
        }
    }
    Ok(parsed)
}

fn has_array(value: &Value) -> bool {
    match value {
        Value::Array(_) => true,
        Value::Object(map) => map.values().any(has_array),
        _ => false,
    }
}

/// The JSON pointer of the first place where `input` has an array and `typed` an object.
fn positional_at(input: &Value, typed: &Value, path: &mut String) -> Option<String> {
    match (input, typed) {
        (Value::Array(_), Value::Object(_)) => Some(if path.is_empty() {
            "/".to_owned()
        } else {
            path.clone()
        }),
        (Value::Array(items), Value::Array(typed_items)) => items
            .iter()
            .zip(typed_items)
            .enumerate()
            .find_map(|(i, (item, typed_item))| {
                descend(path, &i.to_string(), |path| positional_at(item, typed_item, path))
            }),
        (Value::Object(map), Value::Object(typed_map)) => map.iter().find_map(|(key, item)| {
            let typed_item = typed_map.get(key)?;
            descend(path, key, |path| positional_at(item, typed_item, path))
        }),
        _ => None,
    }
}

fn descend(
    path: &mut String,
    segment: &str,
    f: impl FnOnce(&mut String) -> Option<String>,
) -> Option<String> {
    let len = path.len();
    path.push('/');
    path.push_str(segment);
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
            (json!([true]), "/"),
            (json!({"user_input": [["text", "hi"]]}), "/user_input/0"),
            (
                json!({"user_input": [{"type": "image_url", "image_url": ["data:,", null]}]}),
                "/user_input/0/image_url",
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
}
