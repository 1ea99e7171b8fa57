//! JSON Schema and TypeScript export of the protocol types.
//!
//! Both bundles are generated from the Rust types, so they cannot drift from what the server
//! reads and writes. `cargo run -p kimi-wire --bin export_schema` writes them to `schema/`, and the
//! `schema_drift` test fails when the committed files differ from what the types generate.
//!
//! The JSON Schema describes what the server *accepts* (schemars' deserialize contract): keys with
//! a default may be left out. Everything the server emits validates against it, with every key
//! present.

use std::any::TypeId;
use std::collections::{BTreeMap, HashSet};

use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};
use ts_rs::{Config, TS, TypeVisitor};

use crate::error_data::ErrorData;
use crate::message::{
    ApprovalAnswer, ApprovalRequest, ClientRequest, Event, HookAnswer, HookRequest, QuestionAnswer,
    QuestionRequest, Request, ToolCallRequest, ToolResult, WireMessage,
};
use crate::params::{
    CancelResult, InitializeParams, InitializeResult, PromptParams, PromptResult, ReplayResult,
    SetPlanModeParams, SetPlanModeResult, SteerParams, SteerResult,
};

/// The protocol version the bundles describe.
pub const PROTOCOL_VERSION: &str = "1.10";

/// The command that regenerates the committed bundles.
pub const REGENERATE_COMMAND: &str = "cargo run -p kimi-wire --bin export_schema";

/// Path of the JSON Schema bundle, relative to the workspace root.
pub const JSON_SCHEMA_PATH: &str = "schema/wire.schema.json";

/// Path of the TypeScript bundle, relative to the workspace root.
pub const TYPESCRIPT_PATH: &str = "schema/wire.ts";

/// Registers `T` in the generator and returns a `$ref` to it.
fn reference<T: JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    generator.subschema_for::<T>().to_value()
}

/// The schema of what the client answers request kind `R` with.
fn answer<R: ClientRequest>(generator: &mut SchemaGenerator) -> Value {
    reference::<R::Answer>(generator)
}

/// The whole protocol as one JSON Schema (draft 2020-12) document, pretty-printed with a trailing
/// newline. `$defs` holds every type; `x-methods` maps each client method to its params and
/// result, `x-messages` maps the server's `event`/`request` messages to their params and the
/// client's answers, and `x-errors` describes `error.data` for clients that ask for errors as data.
pub fn json_schema_bundle() -> String {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let no_params = json!({ "description": "Ignored; may be absent." });
    let methods = json!({
        "initialize": {
            "params": reference::<InitializeParams>(&mut generator),
            "result": reference::<InitializeResult>(&mut generator),
        },
        "prompt": {
            "params": reference::<PromptParams>(&mut generator),
            "result": reference::<PromptResult>(&mut generator),
        },
        "steer": {
            "params": reference::<SteerParams>(&mut generator),
            "result": reference::<SteerResult>(&mut generator),
        },
        "cancel": {
            "params": no_params,
            "result": reference::<CancelResult>(&mut generator),
        },
        "set_plan_mode": {
            "params": reference::<SetPlanModeParams>(&mut generator),
            "result": reference::<SetPlanModeResult>(&mut generator),
        },
        "replay": {
            "params": no_params,
            "result": reference::<ReplayResult>(&mut generator),
        },
    });
    let messages = json!({
        "event": { "params": reference::<Event>(&mut generator) },
        "request": {
            "params": reference::<Request>(&mut generator),
            "answers": {
                "ApprovalRequest": answer::<ApprovalRequest>(&mut generator),
                "ToolCallRequest": answer::<ToolCallRequest>(&mut generator),
                "QuestionRequest": answer::<QuestionRequest>(&mut generator),
                "HookRequest": answer::<HookRequest>(&mut generator),
            },
        },
        "wire.jsonl": { "message": reference::<WireMessage>(&mut generator) },
    });
    let errors = json!({
        "description": "Extension: `error.data` of every error response, for clients that set \
                        `capabilities.error_data` in `initialize`; other clients get the reference's `data`.",
        "data": reference::<ErrorData>(&mut generator),
    });

    // Sorted, so a new type lands in a predictable place in the diff.
    let defs: BTreeMap<String, Value> = generator.take_definitions(true).into_iter().collect();
    let mut document = Map::new();
    document.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    document.insert(
        "title".into(),
        json!(format!("Kimi Wire protocol {PROTOCOL_VERSION}")),
    );
    document.insert(
        "description".into(),
        json!(format!(
            "JSON-RPC 2.0 over stdio, one JSON object per line. GENERATED by `{REGENERATE_COMMAND}`; \
             do not edit."
        )),
    );
    document.insert("x-methods".into(), methods);
    document.insert("x-messages".into(), messages);
    document.insert("x-errors".into(), errors);
    document.insert("$defs".into(), Value::Object(defs.into_iter().collect()));

    let mut text = serde_json::to_string_pretty(&Value::Object(document))
        .unwrap_or_else(|error| format!("{{\"error\": \"{error}\"}}"));
    text.push('\n');
    text
}

/// Collects the declaration of every exportable type reachable from the roots.
struct Declarations {
    config: Config,
    seen: HashSet<TypeId>,
    /// Type name to its declaration (doc comment included).
    decls: BTreeMap<String, String>,
}

impl Declarations {
    fn add<T: TS + ?Sized + 'static>(&mut self) {
        if <T as TS>::output_path().is_none() || !self.seen.insert(TypeId::of::<T>()) {
            return;
        }
        let mut decl = <T as TS>::docs().unwrap_or_default();
        decl.push_str("export ");
        decl.push_str(&<T as TS>::decl(&self.config));
        self.decls.insert(<T as TS>::ident(&self.config), decl);
        <T as TS>::visit_dependencies(self);
    }
}

impl TypeVisitor for Declarations {
    fn visit<T: TS + 'static + ?Sized>(&mut self) {
        self.add::<T>();
    }
}

/// Every protocol type as TypeScript declarations in one module, sorted by name, with a trailing
/// newline. Integers are `number` (JSON has no other kind); `T | null` marks keys that are always
/// present but may be null, `?` keys that may be absent.
pub fn typescript_bundle() -> String {
    let mut declarations = Declarations {
        config: Config::new().with_large_int("number"),
        seen: HashSet::new(),
        decls: BTreeMap::new(),
    };
    declarations.add::<InitializeParams>();
    declarations.add::<InitializeResult>();
    declarations.add::<PromptParams>();
    declarations.add::<PromptResult>();
    declarations.add::<SteerParams>();
    declarations.add::<SteerResult>();
    declarations.add::<CancelResult>();
    declarations.add::<SetPlanModeParams>();
    declarations.add::<SetPlanModeResult>();
    declarations.add::<ReplayResult>();
    declarations.add::<Event>();
    declarations.add::<Request>();
    declarations.add::<WireMessage>();
    declarations.add::<ApprovalAnswer>();
    declarations.add::<ToolResult>();
    declarations.add::<QuestionAnswer>();
    declarations.add::<HookAnswer>();
    declarations.add::<ErrorData>();

    let mut out = format!(
        "// GENERATED by `{REGENERATE_COMMAND}`; do not edit.\n\
         // Kimi Wire protocol {PROTOCOL_VERSION}: JSON-RPC 2.0 over stdio, one JSON object per line.\n"
    );
    for decl in declarations.decls.values() {
        out.push('\n');
        out.push_str(decl);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_schema_bundle_is_a_valid_draft_2020_12_schema() {
        let schema: Value = serde_json::from_str(&json_schema_bundle()).unwrap();
        assert!(jsonschema::meta::is_valid(&schema));
        for name in [
            "Event",
            "Request",
            "WireMessage",
            "InitializeParams",
            "HookAnswer",
        ] {
            assert!(schema["$defs"].get(name).is_some(), "{name} missing");
        }
    }

    #[test]
    fn typescript_bundle_declares_every_root() {
        let ts = typescript_bundle();
        for name in ["Event", "Request", "WireMessage", "InitializeParams", "JsonValue"] {
            assert!(ts.contains(&format!("export type {name} =")), "{name} missing");
        }
    }
}
