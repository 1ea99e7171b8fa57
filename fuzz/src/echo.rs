//! Properties of the echo DSL parser on arbitrary text. Shared with `crates/kimi-llm/tests/fuzz_seeds.rs`
//! (included there by path).

use kimi_llm::echo::parse_script;

/// Parses `data` (lossy UTF-8) as a script: it must not panic, and a parsed script has at most one event
/// per line plus the message id and usage.
pub fn check_script(data: &[u8]) {
    let script = String::from_utf8_lossy(data);
    let Ok(parsed) = parse_script(&script) else {
        return;
    };
    // Every line at most one part; plus `id` and `usage`, each at most once.
    let lines = script.split(['\n', '\r']).count();
    assert!(
        parsed.events.len() <= lines + 2,
        "{} events from {lines} lines",
        parsed.events.len()
    );
    // Parsing is deterministic.
    assert_eq!(parse_script(&script).ok(), Some(parsed));
}
