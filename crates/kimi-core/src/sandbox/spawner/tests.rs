//! The spawner as a process: these tests start it from the test binary itself ([`spawner_entry`] is
//! the entry a re-executed test binary runs), confined by Landlock as in the agent.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;

use super::client::{Launcher, Policy, Spawner, null};
use super::{SpawnRequest, SpawnStdio, Spawners};
use crate::sandbox::{CommandSandbox, Confined, rules};

/// Set in the environment of a test binary started as a spawner.
const ENTRY_VAR: &str = "KIMI_SANDBOX_SPAWNER_TEST_ENTRY";
/// Bounds every wait on the spawner.
const WAIT: Duration = Duration::from_secs(20);

/// Not a test of its own: the spawner's `main` when this binary is started by [`test_launcher`].
#[test]
fn spawner_entry() {
    if std::env::var_os(ENTRY_VAR).is_some() {
        super::main();
        std::process::exit(0);
    }
}

fn test_launcher() -> Launcher {
    Launcher {
        program: std::env::current_exe().unwrap(),
        args: [
            "sandbox::spawner::tests::spawner_entry",
            "--exact",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ]
        .map(OsString::from)
        .to_vec(),
        env: vec![(ENTRY_VAR.into(), "1".into())],
    }
}

/// The kernel's Landlock ABI number for the rules, or a loud failure.
fn abi() -> u32 {
    let kernel = rules::kernel_abi()
        .unwrap_or_else(|| panic!("THIS KERNEL HAS NO LANDLOCK: the spawner cannot be tested here"));
    rules::abi_number(rules::rights_abi(kernel))
}

/// A work dir (writable) and an outside dir (not), real paths.
struct Dirs {
    _root: tempfile::TempDir,
    work: PathBuf,
    outside: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(root.path()).unwrap();
    let (work, outside) = (real.join("work"), real.join("outside"));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    Dirs {
        _root: root,
        work,
        outside,
    }
}

fn sh(script: &str, cwd: &Path) -> SpawnRequest {
    SpawnRequest {
        program: PathBuf::from("/bin/sh"),
        args: vec!["-c".into(), script.into()],
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("ONLY".into(), "given".into()),
        ],
        cwd: cwd.to_owned(),
    }
}

/// Stdio with stdout and stderr into one pipe; the read end.
fn piped() -> (SpawnStdio, std::io::PipeReader) {
    let (read, write) = std::io::pipe().unwrap();
    let write: OwnedFd = write.into();
    let stdio = SpawnStdio {
        stdin: null().unwrap(),
        stdout: write.try_clone().unwrap(),
        stderr: write,
    };
    (stdio, read)
}

fn read_all(mut pipe: std::io::PipeReader) -> String {
    let mut out = String::new();
    pipe.read_to_string(&mut out).unwrap();
    out
}

async fn bounded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

#[tokio::test]
async fn commands_run_confined_in_their_own_group_with_only_the_given_environment() {
    let dirs = dirs();
    let spawners = Spawners::with_launcher(test_launcher(), None);
    let (stdio, out) = piped();
    let script = format!(
        "echo in > {work}/in && echo written; echo out > {outside}/out || echo refused; \
         echo \"$$ $(cut -d' ' -f5 /proc/$$/stat) ${{ONLY}} ${{HOME-no-home}} $(pwd)\"; exit 3",
        work = dirs.work.display(),
        outside = dirs.outside.display()
    );
    let mut child = bounded(
        "the spawn",
        spawners.spawn(
            abi(),
            std::slice::from_ref(&dirs.work),
            sh(&script, &dirs.work),
            stdio,
        ),
    )
    .await
    .unwrap();
    let status = bounded("the exit", child.wait()).await.unwrap();
    assert_eq!(status.code(), Some(3));
    // Asked again, the status is kept.
    assert_eq!(child.try_wait().unwrap(), Some(status));
    let out = read_all(out);
    let pid = child.id();
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("written"));
    assert!(
        lines.next().is_some_and(|l| l.contains("Permission denied")),
        "{out}"
    );
    assert_eq!(lines.next(), Some("refused"));
    assert_eq!(
        lines.next(),
        Some(format!("{pid} {pid} given no-home {}", dirs.work.display()).as_str()),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(dirs.work.join("in")).unwrap(), "in\n");
    assert!(!dirs.outside.join("out").exists());
}

#[tokio::test]
async fn a_failed_spawn_is_its_errno_and_the_spawner_serves_on() {
    let dirs = dirs();
    let spawners = Spawners::with_launcher(test_launcher(), None);
    let roots = std::slice::from_ref(&dirs.work);
    let mut missing = sh("", &dirs.work);
    missing.program = PathBuf::from("/nonexistent/program");
    let (stdio, _out) = piped();
    let error = bounded("the spawn", spawners.spawn(abi(), roots, missing, stdio))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::NotFound, "{error}");
    let (stdio, out) = piped();
    let mut child = bounded(
        "the spawn",
        spawners.spawn(abi(), roots, sh("kill -9 $$", &dirs.work), stdio),
    )
    .await
    .unwrap();
    let status = bounded("the exit", child.wait()).await.unwrap();
    assert_eq!(status.signal(), Some(9));
    assert_eq!(read_all(out), "");
}

#[tokio::test]
async fn a_dead_spawner_fails_what_it_ran_and_the_next_command_starts_a_new_one() {
    let dirs = dirs();
    let spawners = Spawners::with_launcher(test_launcher(), None);
    let roots = std::slice::from_ref(&dirs.work);
    let (stdio, _out) = piped();
    let mut sleeper = bounded(
        "the spawn",
        spawners.spawn(abi(), roots, sh("exec sleep 100", &dirs.work), stdio),
    )
    .await
    .unwrap();
    let first = bounded("the spawner", spawners.get(abi(), roots)).await.unwrap();
    let first_pid = first.pid();
    crate::procgroup::signal(
        i32::try_from(first_pid).unwrap(),
        nix::sys::signal::Signal::SIGKILL,
    );
    bounded("the spawner's end", first.ended()).await;
    assert!(!first.is_alive());
    // Its command's end can no longer be known; the caller stops its group.
    let lost = bounded("the lost exit", sleeper.wait()).await.unwrap_err();
    assert!(lost.to_string().contains("exit status is unknown"), "{lost}");
    crate::procgroup::signal(
        i32::try_from(sleeper.id()).unwrap(),
        nix::sys::signal::Signal::SIGKILL,
    );
    // The dead spawner refuses; the pool starts a new one.
    let (stdio, _) = piped();
    let refused = bounded("the refusal", first.spawn(sh("true", &dirs.work), stdio))
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("spawner process ended"), "{refused}");
    drop(first);
    let (stdio, out) = piped();
    let mut child = bounded(
        "the spawn",
        spawners.spawn(abi(), roots, sh("echo again", &dirs.work), stdio),
    )
    .await
    .unwrap();
    assert!(bounded("the exit", child.wait()).await.unwrap().success());
    assert_eq!(read_all(out), "again\n");
    let second = bounded("the spawner", spawners.get(abi(), roots)).await.unwrap();
    assert_ne!(second.pid(), first_pid);
}

#[tokio::test]
async fn a_spawner_that_cannot_start_or_confine_itself_runs_nothing() {
    let dirs = dirs();
    let marker = dirs.work.join("ran");
    let script = format!("touch {}", marker.display());
    // Not a spawner at all: it ends without a word.
    let not_a_spawner = Spawners::with_launcher(
        Launcher {
            program: PathBuf::from("/bin/true"),
            args: Vec::new(),
            env: Vec::new(),
        },
        None,
    );
    let roots = std::slice::from_ref(&dirs.work);
    let (stdio, _) = piped();
    let error = bounded(
        "the refusal",
        not_a_spawner.spawn(abi(), roots, sh(&script, &dirs.work), stdio),
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("ended before it was ready"), "{error}");
    // Not a spawner either: it never answers and never ends. It is killed past the ready limit (10 s,
    // within this test's bound), and nothing runs.
    let silent = Spawners::with_launcher(
        Launcher {
            program: PathBuf::from("/bin/sleep"),
            args: vec!["1000".into()],
            env: Vec::new(),
        },
        None,
    );
    let (stdio, _) = piped();
    let error = bounded(
        "the refusal",
        silent.spawn(abi(), roots, sh(&script, &dirs.work), stdio),
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("did not get ready in time"), "{error}");
    // A spawner asked for rules the kernel has no ABI for.
    let spawners = Spawners::with_launcher(test_launcher(), None);
    let (stdio, _) = piped();
    let error = bounded(
        "the refusal",
        spawners.spawn(99, roots, sh(&script, &dirs.work), stdio),
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("could not confine itself"), "{error}");
    assert!(!marker.exists());
}

#[tokio::test]
async fn new_roots_start_a_new_spawner_and_the_old_one_reports_what_it_started() {
    let dirs = dirs();
    let spawners = Spawners::with_launcher(test_launcher(), None);
    let (hold_read, hold_write) = std::io::pipe().unwrap();
    let (stdio, _out) = piped();
    let stdio = SpawnStdio {
        stdin: hold_read.into(),
        ..stdio
    };
    // Holds until we close its stdin.
    let mut waiting = bounded(
        "the spawn",
        spawners.spawn(
            abi(),
            std::slice::from_ref(&dirs.work),
            sh("read _; exit 5", &dirs.work),
            stdio,
        ),
    )
    .await
    .unwrap();
    let old = bounded(
        "the spawner",
        spawners.get(abi(), std::slice::from_ref(&dirs.work)),
    )
    .await
    .unwrap()
    .pid();
    let both = [dirs.work.clone(), dirs.outside.clone()];
    let (stdio, out) = piped();
    let script = format!("echo now > {}/out", dirs.outside.display());
    let mut child = bounded(
        "the spawn",
        spawners.spawn(abi(), &both, sh(&script, &dirs.work), stdio),
    )
    .await
    .unwrap();
    assert!(bounded("the exit", child.wait()).await.unwrap().success());
    assert_eq!(read_all(out), "");
    assert!(dirs.outside.join("out").exists());
    let new = bounded("the spawner", spawners.get(abi(), &both)).await.unwrap();
    assert_ne!(new.pid(), old);
    drop(hold_write);
    let status = bounded("the old command's exit", waiting.wait()).await.unwrap();
    assert_eq!(status.code(), Some(5));
}

#[tokio::test]
async fn a_confined_command_sandbox_starts_through_its_spawner_with_its_tmpdir() {
    let dirs = dirs();
    let spawners = Arc::new(Spawners::with_launcher(test_launcher(), None));
    let kernel = rules::kernel_abi().unwrap();
    let sandbox = CommandSandbox(Some(Confined {
        landlock: Some((rules::rights_abi(kernel), vec![dirs.work.clone()])),
        writable_files: Vec::new(),
        network: None,
        tmpdir: Some(dirs.work.clone()),
        spawners: Some(spawners),
    }));
    assert!(sandbox.uses_spawner());
    let (stdio, out) = piped();
    let script = format!("echo \"$TMPDIR\"; echo x > {}/f", dirs.outside.display());
    let mut child = bounded("the spawn", sandbox.spawn(sh(&script, &dirs.work), stdio))
        .await
        .unwrap();
    assert!(!bounded("the exit", child.wait()).await.unwrap().success());
    assert!(read_all(out).starts_with(&format!("{}\n", dirs.work.display())));
    assert!(!dirs.outside.join("f").exists());
    // A task's log is a per-command right the spawner cannot give: the caller confines that child itself.
    let with_log = sandbox.clone().with_writable_file(dirs.outside.join("log"));
    assert!(!with_log.uses_spawner());
    let (stdio, _) = piped();
    assert!(with_log.spawn(sh("true", &dirs.work), stdio).await.is_err());
    assert!(!CommandSandbox::unconfined().uses_spawner());
}

#[tokio::test]
async fn a_spawner_started_directly_reports_ready_only_once_confined() {
    let dirs = dirs();
    let policy = Policy {
        abi: abi(),
        roots: vec![dirs.work.clone()],
        network: None,
    };
    let spawner = bounded("the start", Spawner::start(&test_launcher(), policy))
        .await
        .unwrap();
    assert!(spawner.serves(abi(), std::slice::from_ref(&dirs.work)));
    assert!(!spawner.serves(abi(), &[]));
    // The spawner is confined, so what it starts is, no_new_privs included, before any request.
    let (stdio, out) = piped();
    let script = format!(
        "grep -c 'NoNewPrivs:.1' /proc/$$/status; echo x > {}/f",
        dirs.outside.display()
    );
    let mut child = bounded("the spawn", spawner.spawn(sh(&script, &dirs.work), stdio))
        .await
        .unwrap();
    assert!(!bounded("the exit", child.wait()).await.unwrap().success());
    let out = read_all(out);
    assert!(out.starts_with("1\n"), "{out}");
    assert!(!dirs.outside.join("f").exists());
}
