//! Logging: to `<share>/logs/kimi.log`, and to stderr only when asked (`--verbose`/`--debug`), never to
//! stdout, which carries protocol lines only.

use std::path::Path;
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::writer::MakeWriterExt;

/// Installs the global subscriber. A log file that cannot be opened is not fatal: we log nowhere.
pub fn init(share_dir: &Path, debug: bool, to_stderr: bool) {
    let level = if debug { "debug" } else { "info" };
    let filter = EnvFilter::try_from_env("KIMI_LOG").unwrap_or_else(|_| EnvFilter::new(level));
    // Private: the log quotes commands, paths and errors.
    let file = kimi_core::private_files::create_dir_all(&kimi_core::paths::logs_dir(share_dir))
        .and_then(|()| kimi_core::private_files::open_append(&kimi_core::paths::log_file(share_dir)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_target(false);
    let result = match (file, to_stderr) {
        (Ok(file), true) => builder
            .with_writer(Mutex::new(file).and(std::io::stderr))
            .try_init(),
        (Ok(file), false) => builder.with_writer(Mutex::new(file)).try_init(),
        (Err(_), true) => builder.with_writer(std::io::stderr).try_init(),
        (Err(_), false) => builder.with_writer(std::io::sink).try_init(),
    };
    // A second init (tests) keeps the first subscriber; nothing to report.
    let _ = result;
}
