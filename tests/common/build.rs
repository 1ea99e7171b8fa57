//! The binary under test, built on first use. A package cannot name another package's binary
//! (`CARGO_BIN_EXE_*` is only set for the binary's own package), so the suite asks cargo for it, once per
//! test run and always: an existing binary may predate the current source.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, Result, bail};

/// The `kimi-agent` binary of this build profile, built by the first caller.
pub fn agent_binary() -> &'static Path {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BUILT.get_or_init(|| build_agent().map_err(|e| format!("{e:#}"))) {
        Ok(path) => path,
        Err(e) => panic!("cannot build the binary under test: {e}"),
    }
}

fn build_agent() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    // <target>/<profile>/deps/all-<hash>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .context("the test binary has no target dir")?;
    let profile = profile_dir
        .file_name()
        .and_then(|name| name.to_str())
        .context("the target dir has no profile name")?;
    let target_dir = profile_dir.parent().context("the profile dir has no parent")?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = std::process::Command::new(cargo);
    // Only the variables a build depends on: the ones cargo sets for a running test (CARGO_PKG_*,
    // CARGO_MANIFEST_DIR, ...) would change fingerprints and rebuild half the workspace.
    build.env_clear();
    for (key, value) in std::env::vars_os() {
        let name = key.to_string_lossy();
        let keep = matches!(
            name.as_ref(),
            "PATH" | "HOME" | "CARGO_HOME" | "TMPDIR" | "CARGO_INCREMENTAL"
        ) || [
            "RUSTUP_",
            "CARGO_PROFILE_",
            "CARGO_BUILD_",
            "CARGO_NET_",
            "CARGO_TERM_",
        ]
        .iter()
        .any(|prefix| name.starts_with(prefix))
            || name.ends_with("RUSTFLAGS");
        if keep {
            build.env(key, value);
        }
    }
    // The whole workspace's binaries and tests, as `cargo test --workspace` resolves features: built any
    // narrower, the binary's dependencies would be resolved with other features and compiled a second
    // time. After `cargo test --workspace` only the binary itself is left to link.
    build.current_dir(env!("CARGO_MANIFEST_DIR")).args([
        "build",
        "--quiet",
        "--workspace",
        "--bins",
        "--tests",
    ]);
    match profile {
        "debug" => {}
        "release" => {
            build.arg("--release");
        }
        other => {
            build.args(["--profile", other]);
        }
    }
    let status = build
        .arg("--target-dir")
        .arg(target_dir)
        .status()
        .context("cannot run cargo")?;
    if !status.success() {
        bail!("`cargo build --workspace --bins --tests` failed");
    }
    Ok(profile_dir.join("kimi-agent"))
}
