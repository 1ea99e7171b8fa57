//! Properties of the configuration and agent-file parsers on arbitrary text. Shared with
//! `crates/kimi-core/tests/fuzz_seeds.rs` (included there by path).

use std::path::Path;

use kimi_core::AgentSpec;
use kimi_core::{config_from_text as from_text, parse_config_file_text as parse_file_text};

/// `--config` text, a TOML file and a JSON file: parsing must not panic, and a configuration that parses
/// serializes again (the default-file writer and `info` do that).
pub fn check_config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let parsed = [
        from_text(&text),
        parse_file_text(Path::new("fuzz.toml"), &text),
        parse_file_text(Path::new("fuzz.json"), &text),
    ];
    for config in parsed.into_iter().flatten() {
        if let Err(e) = serde_json::to_string(&config) {
            panic!("a parsed configuration does not serialize: {e}");
        }
    }
}

/// An agent file, as if read from a built-in path, so that relative `extend`s resolve to built-in names
/// and never to files on disk.
pub fn check_agent_file(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    // An absolute `extend` is read from disk; keep the fuzzer away from device and kernel files.
    if ["/dev", "/proc", "/sys"].iter().any(|p| text.contains(p)) {
        return;
    }
    if let Ok(spec) = AgentSpec::from_text("builtin:fuzz/agent.yaml", &text) {
        // Whatever parsed yields a tool list without panicking.
        let _ = spec.effective_tools();
    }
}
