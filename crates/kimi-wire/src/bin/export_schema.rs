//! Writes `schema/wire.schema.json` and `schema/wire.ts` from the protocol types.
//!
//! Run `cargo run -p kimi-wire --bin export_schema` after changing a message type, then commit the
//! result; the `schema_drift` test fails until then.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use kimi_wire::schema::{JSON_SCHEMA_PATH, TYPESCRIPT_PATH, json_schema_bundle, typescript_bundle};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn write(relative: &str, contents: &str) -> std::io::Result<()> {
    let path = workspace_root().join(relative);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, contents)
}

#[expect(clippy::print_stderr, reason = "a developer tool reporting what it wrote")]
fn main() -> ExitCode {
    let outputs = [
        (JSON_SCHEMA_PATH, json_schema_bundle()),
        (TYPESCRIPT_PATH, typescript_bundle()),
    ];
    for (relative, contents) in outputs {
        if let Err(error) = write(relative, &contents) {
            eprintln!("export_schema: cannot write {relative}: {error}");
            return ExitCode::FAILURE;
        }
        eprintln!("export_schema: wrote {relative}");
    }
    ExitCode::SUCCESS
}
