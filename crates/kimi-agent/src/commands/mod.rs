//! Subcommands other than the Wire server: `info` and `mcp`.

pub mod info;

use std::process::ExitCode;

use crate::cli::{Command, McpCommand};

/// Runs a subcommand and returns the process exit status.
pub fn run(command: &Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Info(args) => {
            info::run(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp(mcp) => Ok(run_mcp(mcp)),
    }
}

/// Placeholder until the `mcp` subcommands are written.
#[expect(
    clippy::print_stderr,
    reason = "a subcommand's own diagnostics go to the terminal"
)]
fn run_mcp(command: &McpCommand) -> ExitCode {
    let name = match command {
        McpCommand::Add(_) => "add",
        McpCommand::List => "list",
        McpCommand::Remove { .. } => "remove",
        McpCommand::Test { .. } => "test",
    };
    eprintln!("kimi-agent mcp {name}: not implemented yet");
    ExitCode::from(2)
}
