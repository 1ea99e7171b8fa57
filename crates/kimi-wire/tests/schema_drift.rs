//! The committed `schema/` files must equal what the protocol types generate, and the schema must
//! accept what the server emits.

use std::path::{Path, PathBuf};

use kimi_wire::RpcError;
use kimi_wire::message::{ContentPart, Event, StatusUpdate, ToolResult, ToolReturnValue, WireMessage};
use kimi_wire::params::{InitializeParams, PromptResult};
use kimi_wire::schema::{
    JSON_SCHEMA_PATH, REGENERATE_COMMAND, TYPESCRIPT_PATH, json_schema_bundle, typescript_bundle,
};
use serde_json::{Value, json};
use similar::TextDiff;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn check(relative: &str, generated: &str) -> Option<String> {
    let path = workspace_root().join(relative);
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed == generated {
        return None;
    }
    let diff = TextDiff::from_lines(committed.as_str(), generated)
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("{relative} (committed)"),
            &format!("{relative} (generated)"),
        )
        .to_string();
    Some(diff)
}

#[test]
fn committed_schema_matches_the_types() {
    let drift: Vec<String> = [
        check(JSON_SCHEMA_PATH, &json_schema_bundle()),
        check(TYPESCRIPT_PATH, &typescript_bundle()),
    ]
    .into_iter()
    .flatten()
    .collect();
    assert!(
        drift.is_empty(),
        "schema/ is out of date with the protocol types. Regenerate it with\n\n    {REGENERATE_COMMAND}\n\nand commit the result. Differences:\n\n{}",
        drift.join("\n")
    );
}

/// A validator for one `$defs` entry of the bundle.
fn validator_for(definition: &str) -> jsonschema::Validator {
    let mut schema: Value =
        serde_json::from_str(&json_schema_bundle()).unwrap_or_else(|e| panic!("bundle: {e}"));
    schema["$ref"] = json!(format!("#/$defs/{definition}"));
    jsonschema::draft202012::new(&schema).unwrap_or_else(|e| panic!("{definition}: {e}"))
}

#[test]
fn schema_accepts_what_the_server_emits() {
    let wire = validator_for("WireMessage");
    let messages: Vec<WireMessage> = vec![
        Event::from(StatusUpdate::default()).into(),
        Event::from(ContentPart::think("t")).into(),
        Event::from(ToolResult {
            tool_call_id: "tc".into(),
            return_value: ToolReturnValue::error("", "failed", "Failed"),
        })
        .into(),
    ];
    for message in messages {
        let value = serde_json::to_value(&message).unwrap();
        assert!(wire.is_valid(&value), "{value}");
    }
    let unknown_block = json!({"type": "ToolResult", "payload": {"tool_call_id": "t", "return_value": {
        "is_error": false, "output": "", "message": "", "display": [{"type": "fancy", "data": {"x": 1}}], "extras": null}}});
    assert!(wire.is_valid(&unknown_block));

    let prompt = validator_for("PromptResult");
    assert!(prompt.is_valid(&serde_json::to_value(PromptResult::max_steps_reached(3)).unwrap()));

    // Errors as data: what a client that asked for it gets as `error.data`.
    let data = validator_for("ErrorData");
    for error in [
        RpcError::line_too_long(10, 4),
        RpcError::invalid_params("prompt", "$.user_input", "missing field `user_input`"),
        RpcError::session_in_use("s", None),
        RpcError::no_turn_in_progress(),
    ] {
        let value = serde_json::to_value(error.for_client(true).as_ref()).unwrap();
        assert!(data.is_valid(&value["data"]), "{value}");
    }
    assert!(!data.is_valid(&json!({"kind": "no_such_kind"})));
    assert!(!data.is_valid(&json!({"kind": "line_too_long"})));
}

#[test]
fn schema_rejects_what_the_server_rejects() {
    let wire = validator_for("WireMessage");
    assert!(!wire.is_valid(&json!({"type": "ContentPart", "payload": {"type": "foo"}})));
    assert!(!wire.is_valid(&json!({"type": "Nope", "payload": {}})));
    let initialize = validator_for("InitializeParams");
    assert!(!initialize.is_valid(&json!({})));
    let minimal = json!({"protocol_version": "1.10"});
    assert!(initialize.is_valid(&minimal));
    let _: InitializeParams = serde_json::from_value(minimal).unwrap();
}
