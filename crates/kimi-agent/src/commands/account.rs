//! `kimi-agent login` and `kimi-agent logout`: signing in to a Kimi account (see `kimi_core::auth`).
//!
//! Output as the reference's: one line per event, its message; with `--json`, the event as a JSON
//! object per line (what the TypeScript SDK's `login()` reads the verification URL from). A failure
//! exits 1.

use std::path::Path;
use std::process::ExitCode;

use kimi_core::account::{self, LoginEvent, LoginEventKind};

use super::browser;
use crate::cli::AccountArgs;

/// Runs `login`.
pub fn login(args: &AccountArgs, share_dir: &Path) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let env = kimi_core::process_env();
    let mut printer = Printer::new(args.json);
    let ok = runtime.block_on(account::login(
        share_dir,
        &env,
        |event| printer.print(&event),
        |url| {
            browser::open(url, browser::When::Always);
        },
    ));
    Ok(exit_code(ok))
}

/// Runs `logout`.
pub fn logout(args: &AccountArgs, share_dir: &Path) -> anyhow::Result<ExitCode> {
    let mut printer = Printer::new(args.json);
    let ok = account::logout(share_dir, |event| printer.print(&event));
    Ok(exit_code(ok))
}

fn exit_code(ok: bool) -> ExitCode {
    if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// Prints events as lines.
struct Printer {
    json: bool,
    /// The waiting line is shown once (the reference shows a spinner instead).
    said_waiting: bool,
}

impl Printer {
    fn new(json: bool) -> Self {
        Self {
            json,
            said_waiting: false,
        }
    }

    fn print(&mut self, event: &LoginEvent) {
        if self.json {
            // Reference: `json.dumps(..., ensure_ascii=False)`.
            say(&kimi_llm::dumps(&event.to_json(), kimi_llm::Dumps::UNICODE));
            return;
        }
        if event.kind == LoginEventKind::Waiting {
            if !self.said_waiting {
                say("Waiting for user authorization...");
                self.said_waiting = true;
            }
            return;
        }
        say(&event.message);
    }
}

#[expect(
    clippy::print_stdout,
    reason = "login and logout report to the terminal or to the program that runs them"
)]
fn say(line: &str) {
    // Stdout is line-buffered: a program reading the verification URL gets it while we wait.
    println!("{line}");
}
