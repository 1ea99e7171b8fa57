//! Black-box tests: each spawns the real `kimi-agent` binary and speaks JSON-RPC to it over stdio.
//! One test binary (codex's `tests/all.rs` layout) so the suite links once.

mod common;
mod suite;
