//! Tool schemas and names reshaped into what Moonshot's validator accepts.
//!
//! Moonshot checks tool parameters against its own dialect of JSON Schema and
//! answers HTTP 400 for shapes that plain JSON Schema allows: `$ref`
//! (with or without siblings), `type` next to `anyOf`/`oneOf`, a property
//! without `type`, tuple-form `items`, and tool names starting with a digit.
//! Schemas from MCP servers and from schemars (`$defs` for every nested
//! struct) hit these routinely, so every schema goes through
//! [`sanitize_parameters`] before it is sent. The result means the same thing
//! to other OpenAI-compatible servers, so both flavors use it.
//!
//! Reference: kosong's `deref_json_schema` and `ensure_property_types`; this
//! pass also does what those leave to luck (type push-down, tuple items,
//! recursive references).

use std::borrow::Cow;

use serde_json::{Map, Value};

/// Keywords that describe a node's shape without a `type` of its own; a node
/// carrying one of them is left without an inferred `type`.
const COMBINATOR_KEYS: [&str; 8] = ["anyOf", "oneOf", "allOf", "not", "if", "then", "else", "$ref"];
const OBJECT_KEYWORDS: [&str; 7] = [
    "properties",
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "required",
    "minProperties",
    "maxProperties",
];
const ARRAY_KEYWORDS: [&str; 6] = [
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "contains",
];
const STRING_KEYWORDS: [&str; 4] = ["minLength", "maxLength", "pattern", "format"];
const NUMERIC_KEYWORDS: [&str; 5] = [
    "minimum",
    "maximum",
    "multipleOf",
    "exclusiveMinimum",
    "exclusiveMaximum",
];

/// How deep references may nest before a recursive one is cut off.
const MAX_REF_DEPTH: usize = 32;

/// Returns `schema` with local `$ref`s inlined, `$defs`/`definitions`
/// removed, `type` pushed from an `anyOf`/`oneOf` parent into its branches,
/// tuple `items` merged into one schema, and a `type` filled in on every
/// property schema that lacks one.
///
/// A reference that points back into itself is replaced by
/// `{"type": "object"}` at the point of recursion; a remote or unresolvable
/// reference is dropped, leaving its siblings.
pub fn sanitize_parameters(schema: &Value) -> Value {
    let Value::Object(root) = schema else {
        return schema.clone();
    };
    let mut stack = Vec::new();
    let mut out = inline_refs(schema, root, &mut stack);
    if let Value::Object(map) = &mut out {
        map.remove("$defs");
        map.remove("definitions");
        map.remove("$schema");
        map.remove("$id");
    }
    reshape(&mut out);
    if let Value::Object(map) = &mut out {
        fill_types_below(map);
    }
    out
}

/// A tool name Moonshot accepts: characters outside `[A-Za-z0-9_-]` become
/// `_`, and a leading digit gets a `_` prefix. Kimi's built-in functions
/// (names starting with `$`) pass unchanged.
pub fn sanitize_tool_name(name: &str) -> Cow<'_, str> {
    if name.starts_with('$') {
        return Cow::Borrowed(name);
    }
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let leading_digit = name.starts_with(|c: char| c.is_ascii_digit());
    if !leading_digit && name.chars().all(valid) && !name.is_empty() {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 1);
    if leading_digit || name.is_empty() {
        out.push('_');
    }
    out.extend(name.chars().map(|c| if valid(c) { c } else { '_' }));
    Cow::Owned(out)
}

fn resolve_pointer<'a>(root: &'a Map<String, Value>, pointer: &str) -> Option<&'a Value> {
    let path = pointer.strip_prefix('#')?;
    if path.is_empty() {
        return None;
    }
    let mut current: Option<&Value> = None;
    for raw in path.trim_start_matches('/').split('/') {
        let key = raw.replace("~1", "/").replace("~0", "~");
        current = match current {
            None => root.get(&key),
            Some(Value::Object(map)) => map.get(&key),
            Some(Value::Array(items)) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
            Some(_) => None,
        };
        current?;
    }
    current
}

fn inline_refs(node: &Value, root: &Map<String, Value>, stack: &mut Vec<String>) -> Value {
    match node {
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            if let Some(Value::String(pointer)) = map.get("$ref") {
                let target = pointer
                    .starts_with('#')
                    .then(|| resolve_pointer(root, pointer))
                    .flatten();
                match target {
                    Some(_) if stack.contains(pointer) || stack.len() >= MAX_REF_DEPTH => {
                        out.insert("type".into(), Value::String("object".into()));
                    }
                    Some(target) => {
                        stack.push(pointer.clone());
                        let resolved = inline_refs(target, root, stack);
                        stack.pop();
                        for (key, value) in map {
                            if key != "$ref" {
                                out.insert(key.clone(), inline_refs(value, root, stack));
                            }
                        }
                        // The target's keywords win over the siblings, as in the reference.
                        if let Value::Object(resolved) = resolved {
                            out.extend(resolved);
                        }
                        return Value::Object(out);
                    }
                    None => {}
                }
            }
            for (key, value) in map {
                if key == "$ref" || key == "$defs" || key == "definitions" {
                    continue;
                }
                out.insert(key.clone(), inline_refs(value, root, stack));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| inline_refs(v, root, stack)).collect()),
        other => other.clone(),
    }
}

/// Pushes `type` into `anyOf`/`oneOf` branches and merges tuple `items`,
/// everywhere in the tree.
fn reshape(node: &mut Value) {
    match node {
        Value::Object(map) => {
            for key in ["anyOf", "oneOf"] {
                if !map.contains_key(key) {
                    continue;
                }
                if let Some(parent_type) = map.remove("type")
                    && let Some(Value::Array(branches)) = map.get_mut(key)
                {
                    for branch in branches.iter_mut() {
                        if let Value::Object(b) = branch {
                            let open = !b.contains_key("type")
                                && !COMBINATOR_KEYS.iter().any(|k| b.contains_key(*k));
                            if open {
                                b.insert("type".into(), parent_type.clone());
                            }
                        }
                    }
                }
            }
            if let Some(Value::Array(items)) = map.get_mut("items") {
                let mut items = std::mem::take(items);
                items.dedup();
                let merged = match items.len() {
                    0 => Value::Object(Map::new()),
                    1 => items.pop().unwrap_or(Value::Null),
                    _ => {
                        let mut any = Map::new();
                        any.insert("anyOf".into(), Value::Array(items));
                        Value::Object(any)
                    }
                };
                map.insert("items".into(), merged);
            }
            for value in map.values_mut() {
                reshape(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(reshape),
        _ => {}
    }
}

/// Fills `type` on the property schemas below `node` (not on `node` itself).
fn fill_types_below(node: &mut Map<String, Value>) {
    if let Some(Value::Object(props)) = node.get_mut("properties") {
        props.values_mut().for_each(fill_type);
    }
    match node.get_mut("items") {
        Some(Value::Array(items)) => items.iter_mut().for_each(fill_type),
        Some(items @ Value::Object(_)) => fill_type(items),
        _ => {}
    }
    if let Some(additional @ Value::Object(_)) = node.get_mut("additionalProperties") {
        fill_type(additional);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = node.get_mut(key) {
            branches.iter_mut().for_each(fill_type);
        }
    }
}

fn fill_type(node: &mut Value) {
    let Value::Object(map) = node else { return };
    if !map.contains_key("type") && !COMBINATOR_KEYS.iter().any(|k| map.contains_key(*k)) {
        let inferred = match (map.get("enum"), map.get("const")) {
            (Some(Value::Array(values)), _) if !values.is_empty() => type_of_values(values.iter()),
            (_, Some(value)) => type_of_values(std::iter::once(value)),
            _ => type_of_structure(map),
        };
        map.insert("type".into(), Value::String(inferred.into()));
    }
    fill_types_below(map);
}

fn type_of_structure(map: &Map<String, Value>) -> &'static str {
    let has = |keys: &[&str]| keys.iter().any(|k| map.contains_key(*k));
    if has(&OBJECT_KEYWORDS) {
        "object"
    } else if has(&ARRAY_KEYWORDS) {
        "array"
    } else if has(&STRING_KEYWORDS) {
        "string"
    } else if has(&NUMERIC_KEYWORDS) {
        "number"
    } else {
        "string"
    }
}

fn type_of_values<'a>(values: impl Iterator<Item = &'a Value>) -> &'static str {
    let mut seen: Option<&'static str> = None;
    for value in values {
        let kind = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        seen = Some(match seen {
            None => kind,
            Some(prev) if prev == kind => prev,
            Some("integer" | "number") if matches!(kind, "integer" | "number") => "number",
            // Mixed kinds: Moonshot tolerates "string" without checking the values.
            Some(_) => return "string",
        });
    }
    seen.unwrap_or("string")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn has_key(value: &Value, key: &str) -> bool {
        match value {
            Value::Object(map) => map.contains_key(key) || map.values().any(|v| has_key(v, key)),
            Value::Array(items) => items.iter().any(|v| has_key(v, key)),
            _ => false,
        }
    }

    #[test]
    fn inlines_schemars_defs() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "range": {"anyOf": [{"$ref": "#/$defs/Range"}, {"type": "null"}]},
                "mode": {"$ref": "#/$defs/Mode", "description": "how"}
            },
            "$defs": {
                "Range": {"type": "object", "properties": {"start": {"type": "integer"}}},
                "Mode": {"enum": ["a", "b"]}
            }
        });
        assert_eq!(
            sanitize_parameters(&schema),
            json!({
                "type": "object",
                "properties": {
                    "range": {"anyOf": [
                        {"type": "object", "properties": {"start": {"type": "integer"}}},
                        {"type": "null"}
                    ]},
                    "mode": {"description": "how", "enum": ["a", "b"], "type": "string"}
                }
            })
        );
    }

    #[test]
    fn recursive_and_remote_refs_terminate() {
        let schema = json!({
            "type": "object",
            "properties": {
                "node": {"$ref": "#/definitions/Node"},
                "remote": {"$ref": "https://example.com/x.json", "description": "r"}
            },
            "definitions": {
                "Node": {"type": "object", "properties": {"child": {"$ref": "#/definitions/Node"}}}
            }
        });
        let out = sanitize_parameters(&schema);
        assert!(!has_key(&out, "$ref"), "{out}");
        assert!(!has_key(&out, "definitions"), "{out}");
        assert_eq!(
            out["properties"]["node"]["properties"]["child"],
            json!({"type": "object"})
        );
        assert_eq!(
            out["properties"]["remote"],
            json!({"description": "r", "type": "string"})
        );
    }

    #[test]
    fn pushes_type_into_any_of_and_merges_tuple_items() {
        let schema = json!({
            "type": "object",
            "properties": {
                "v": {"type": "string", "anyOf": [{"format": "date"}, {"type": "null"}, {"enum": ["x"]}]},
                "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
                "same": {"items": [{"type": "string"}, {"type": "string"}]}
            }
        });
        assert_eq!(
            sanitize_parameters(&schema),
            json!({
                "type": "object",
                "properties": {
                    "v": {"anyOf": [
                        {"format": "date", "type": "string"},
                        {"type": "null"},
                        {"enum": ["x"], "type": "string"}
                    ]},
                    "pair": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
                    "same": {"items": {"type": "string"}, "type": "array"}
                }
            })
        );
    }

    #[test]
    fn infers_missing_types_like_the_reference() {
        let schema = json!({
            "properties": {
                "a": {"enum": [1, 2.5]},
                "b": {"const": true},
                "c": {"enum": ["x", 1]},
                "d": {"required": ["x"]},
                "e": {"minItems": 1},
                "f": {"maximum": 3},
                "g": {"description": "anything"},
                "h": {"type": "array", "items": {"properties": {"i": {}}}}
            }
        });
        let out = sanitize_parameters(&schema);
        // The root itself is a container and keeps its shape.
        assert_eq!(out.get("type"), None);
        let types: Vec<&str> = ["a", "b", "c", "d", "e", "f", "g"]
            .iter()
            .map(|k| out["properties"][k]["type"].as_str().unwrap_or("?"))
            .collect();
        assert_eq!(
            types,
            [
                "number", "boolean", "string", "object", "array", "number", "string"
            ]
        );
        assert_eq!(
            out["properties"]["h"]["items"],
            json!({"properties": {"i": {"type": "string"}}, "type": "object"})
        );
    }

    #[test]
    fn tool_names() {
        let rows = [
            ("ReadFile", "ReadFile"),
            ("1password", "_1password"),
            ("mcp__srv.tool", "mcp__srv_tool"),
            ("$web_search", "$web_search"),
            ("", "_"),
        ];
        for (name, expected) in rows {
            assert_eq!(sanitize_tool_name(name), expected, "{name}");
        }
    }
}
