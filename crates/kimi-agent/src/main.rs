//! `kimi-agent`: a headless coding agent speaking the Kimi Wire protocol 1.10 over stdin/stdout.
//!
//! Thin on purpose: parse flags, run a subcommand or set up logging and serve the wire protocol.

mod cli;
mod commands;
mod logging;
mod run;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use cli::Cli;

fn main() -> ExitCode {
    // Not a clap subcommand: it is internal, and must start without parsing or logging anything.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == kimi_core::guardian::SUBCOMMAND)
    {
        kimi_core::guardian::main();
        return ExitCode::SUCCESS;
    }
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == kimi_core::spawner::SUBCOMMAND)
    {
        kimi_core::spawner::main();
        return ExitCode::SUCCESS;
    }
    let cli = Cli::parse();
    if let Err(e) = cli.validate() {
        e.exit();
    }
    if let Some(command) = &cli.command {
        return match commands::run(command, &cli) {
            Ok(code) => code,
            Err(e) => fail(&format!("{e:#}")),
        };
    }
    let share_dir = kimi_core::paths::share_dir();
    // Before anything is written there: the share directory is the user's alone (docs/security.md).
    if let Err(e) = kimi_core::private_files::create_dir_all(&share_dir) {
        return fail(&format!("cannot create {}: {e}", share_dir.display()));
    }
    logging::init(&share_dir, cli.debug, cli.verbose || cli.debug);
    let config = match kimi_core::load_config_in(&cli.config_source(), &share_dir) {
        Ok(config) => config,
        // Reference: a bad `--config` text is a usage error (status 2); a bad file is a start-up failure.
        Err(e) if cli.config.is_some() => Cli::bad_parameter("--config", &e.to_string()).exit(),
        Err(e) => return fail(&format!("{e}")),
    };
    // Reference: unreadable MCP JSON is a usage error of the flag that named it.
    let mcp_sources =
        match kimi_core::mcp_config::read_sources(&cli.mcp_config_files, &cli.mcp_configs, &share_dir) {
            Ok(sources) => sources,
            Err(e) => Cli::bad_parameter(e.flag(), &e.to_string()).exit(),
        };
    // One thread runs the whole session (server, agent loop, tools' async parts): a hand-off between
    // tasks is then a queue push, not a wake-up of another thread. Blocking work goes to tokio's
    // blocking pool, stdout to the wire's writer thread, which the runtime wakes when it goes idle.
    let idle = kimi_wire::IdleSignal::default();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_park({
            let idle = idle.clone();
            move || idle.idle()
        })
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}")),
    };
    let options = kimi_core::RunOptions {
        work_dir: cli.work_dir.clone(),
        session: cli.session_id().map(str::to_owned),
        continue_last: cli.continue_session,
        model: cli.model.clone(),
        thinking: cli.thinking(),
        yolo: cli.yolo,
        afk: cli.afk,
        plan: cli.plan,
        max_steps_per_turn: cli.max_steps_per_turn,
        max_retries_per_step: cli.max_retries_per_step,
        max_ralph_iterations: cli.max_ralph_iterations,
        add_dirs: cli.add_dirs,
        agent_file: cli.agent_file.or_else(|| {
            cli.agent
                .and_then(cli::BuiltinAgent::agent_file)
                .map(std::path::PathBuf::from)
        }),
        skills_dirs: cli.skills_dirs,
        mcp_sources,
        sandbox: cli.sandbox,
        record_llm: cli.record_llm,
    };
    let result = runtime.block_on(run::serve(options, config, share_dir.clone(), idle));
    // Tools may have left blocking work behind (a read of a huge file); do not wait for it.
    runtime.shutdown_timeout(Duration::from_millis(200));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            fail(&format!(
                "{e:#}\nSee logs: {}",
                kimi_core::paths::log_file(&share_dir).display()
            ))
        }
    }
}

#[expect(
    clippy::print_stderr,
    reason = "start-up failures go to the terminal; stdout is the protocol channel"
)]
fn fail(message: &str) -> ExitCode {
    eprintln!("{message}");
    ExitCode::FAILURE
}
