//! One module per area of the protocol; the shared harness is in `tests/common`.

mod adversarial;
mod background;
mod background_agents;
mod btw;
mod cassettes;
mod cli;
mod clients;
mod crash;
mod cron;
mod ends_of_life;
mod errors;
mod errors_as_data;
mod faults;
mod git_diff;
mod hooks;
mod initialize;
mod kimi_code;
mod login;
mod mcp;
mod mcp_discovery;
mod mcp_oauth;
mod model_loop;
mod plan_mode;
mod prompt;
mod providers;
mod providers_more;
mod ralph;
mod sandbox;
mod sdk;
mod security;
mod session_compat;
mod session_lock;
mod session_state;
mod sessions;
mod shell_guardian;
mod skills;
mod steer_cancel;
mod subagents;
mod toolset;
mod web_tools;
mod workspace;

/// A self-check of the harness's MD5, which the session tests rely on to find folders independently.
#[test]
fn md5_matches_known_answers() {
    use crate::common::md5_hex;
    pretty_assertions::assert_eq!(md5_hex(b""), "d41d8cd98f00b204e9800998ecf8427e");
    pretty_assertions::assert_eq!(md5_hex(b"abc"), "900150983cd24fb0d6963f7d28e17f72");
    pretty_assertions::assert_eq!(
        md5_hex(b"12345678901234567890123456789012345678901234567890123456789012345678901234567890"),
        "57edf4a22be3c955ac49da2e2107b67a"
    );
}
