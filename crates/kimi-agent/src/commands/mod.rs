//! Subcommands other than the Wire server: `info`, `mcp`, `login`, `logout` and `cassette`.

pub mod account;
mod browser;
pub mod cassette;
pub mod info;
pub mod mcp;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

/// Runs a subcommand (`cli` holds the top-level flags) and returns the process exit status.
pub fn run(command: &Command, cli: &Cli) -> anyhow::Result<ExitCode> {
    match command {
        Command::Info(args) => {
            info::run(args, cli)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp(command) => Ok(mcp::run(command, &kimi_core::paths::share_dir())),
        Command::Login(args) => account::login(args, &kimi_core::paths::share_dir()),
        Command::Logout(args) => account::logout(args, &kimi_core::paths::share_dir()),
        Command::Cassette(command) => cassette::run(command),
    }
}
