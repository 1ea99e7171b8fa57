//! `kimi-agent cassette from-session SESSION_DIR [-o FILE]`: a cassette rebuilt from a session's
//! files (`kimi_core::session_cassette`), one call per line, to stdout or FILE; what could not be
//! rebuilt is said on stderr.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::cli::CassetteCommand;

/// Runs a `cassette` subcommand.
pub fn run(command: &CassetteCommand) -> anyhow::Result<ExitCode> {
    match command {
        CassetteCommand::FromSession { session_dir, output } => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            let cassette = runtime.block_on(kimi_core::cassette_from_session(session_dir))?;
            let mut text = String::new();
            for record in &cassette.records {
                text.push_str(&serde_json::to_string(record)?);
                text.push('\n');
            }
            match output {
                Some(path) => kimi_core::private_files::write_atomic(path, text.as_bytes())
                    .with_context(|| format!("cannot write {}", path.display()))?,
                None => std::io::stdout().lock().write_all(text.as_bytes())?,
            }
            report(cassette.records.len(), &cassette.notes);
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[expect(
    clippy::print_stderr,
    reason = "the command's own report; stdout may carry the cassette"
)]
fn report(calls: usize, notes: &[String]) {
    eprintln!("{calls} model call(s) written");
    for note in notes {
        eprintln!("note: {note}");
    }
}
