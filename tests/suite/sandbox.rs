//! The sandbox from outside (docs/sandbox.md): with `--sandbox workspace-write` every way out a
//! command (foreground or background) or a file tool might try is refused by the kernel or by the
//! tools, while work inside the workspace (git included) goes on; `sandbox_network = false` cuts the
//! network, the host's loopback included; read-only mode writes only in a private temp dir; and a
//! sandbox the kernel cannot enforce refuses every command instead of running it unconfined.
//!
//! Each test proves its outcome on the file system (or on a listener the test owns), not only on the
//! command's exit status. These tests need Landlock and network namespaces: where the kernel lacks
//! them, they fail and say so (the `initialize` answer carries the reason); they never pass silently.
//!
//! Layout of each home: `<root>/work` (the work dir), `<root>/tmp` (the agent's TMPDIR, so the system
//! temp dir is a writable root of its own and `/tmp` is not), `<root>/outside` (a directory no mode
//! lets commands write, holding `existing` = "original"), `<root>/home/.kimi` (the share dir).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail, ensure};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::mock_model::{MockModel, Reply, message_text, tool_result};
use crate::common::{TestHome, WireProcess, payloads, shell_call_line, tool_call_line};

/// What the escape attempts try to leave in `outside`.
const ORIGINAL: &str = "original";

/// A home whose agent runs with a sandbox.
struct Sandboxed {
    home: TestHome,
    /// The agent's TMPDIR.
    tmp: PathBuf,
    /// Not writable in any mode.
    outside: PathBuf,
}

impl Sandboxed {
    /// The home and its directories, without a configuration yet.
    fn new() -> Result<Self> {
        let home = TestHome::new()?.arg("--yolo");
        let root = std::fs::canonicalize(home.root.path())?;
        let (tmp, outside) = (root.join("tmp"), root.join("outside"));
        std::fs::create_dir_all(&tmp)?;
        std::fs::create_dir_all(&outside)?;
        std::fs::write(outside.join("existing"), ORIGINAL)?;
        Ok(Self { home, tmp, outside })
    }

    /// The scripted model answering `scripts`, with `sandbox` keys merged into the config.
    fn scripted(mut self, scripts: &[&str], sandbox: Value) -> Result<Self> {
        let path = self.home.scripted_config(scripts, json!({}))?;
        let config: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
        self.home = self.home.with_config(&merged(config, &sandbox))?;
        Ok(self)
    }

    /// `model`, with `sandbox` keys merged into the config.
    fn mocked(mut self, model: &MockModel, sandbox: Value) -> Result<Self> {
        self.home = self
            .home
            .with_config(&merged(model.config(json!({})), &sandbox))?;
        Ok(self)
    }

    fn work(&self) -> PathBuf {
        self.home.work()
    }

    fn out(&self, name: &str) -> String {
        self.outside.join(name).display().to_string()
    }

    /// Starts the agent with `args` before the usual ones and TMPDIR set to `tmp`.
    async fn spawn(&self, args: &[&str]) -> Result<WireProcess> {
        self.spawn_with_tmpdir(args, &self.tmp).await
    }

    async fn spawn_with_tmpdir(&self, args: &[&str], tmpdir: &Path) -> Result<WireProcess> {
        let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        all.extend(self.home.args());
        let tmpdir = tmpdir.display().to_string();
        WireProcess::spawn_with_env(&self.home, all, &[("TMPDIR", tmpdir.as_str())]).await
    }

    /// Whether the escape attempts left `outside` as it was: only `existing`, unchanged.
    fn outside_untouched(&self) -> Result<()> {
        let names = crate::common::dir_names(&self.outside)?;
        ensure!(names == ["existing"], "something was written outside: {names:?}");
        let existing = std::fs::read_to_string(self.outside.join("existing"))?;
        ensure!(
            existing == ORIGINAL,
            "outside/existing was changed to {existing:?}"
        );
        Ok(())
    }
}

fn merged(mut config: Value, extra: &Value) -> Value {
    if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
        config.extend(extra.clone());
    }
    config
}

/// `initialize`, failing loudly unless the kernel enforces the sandbox; returns its `sandbox` field.
async fn initialize_enforced(wire: &mut WireProcess) -> Result<Value> {
    let result = wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let sandbox = result["sandbox"].clone();
    if sandbox["enforced"] != json!(true) {
        bail!(
            "THIS MACHINE CANNOT RUN THE SANDBOX TESTS: the kernel does not enforce the sandbox here \
             ({}). They need Landlock (Linux 5.13+, enabled) and network namespaces. Full answer: {sandbox}",
            sandbox["error"]
        );
    }
    Ok(sandbox)
}

/// The `return_value` of the ToolResult for `tool_call_id`.
fn result_of<'a>(events: &'a [Value], tool_call_id: &str) -> Result<&'a Value> {
    payloads(events, "ToolResult")
        .into_iter()
        .find(|r| r["tool_call_id"] == tool_call_id)
        .map(|r| &r["return_value"])
        .with_context(|| format!("no ToolResult for {tool_call_id}"))
}

fn text(value: &Value, key: &str) -> String {
    value[key].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn escape_attempts_are_refused_while_work_inside_goes_on() -> Result<()> {
    let probe = Sandboxed::new()?;
    let share = probe.home.share().display().to_string();
    let attempts: Vec<(&str, String)> = vec![
        ("redirect", format!("echo x > {}", probe.out("redirect"))),
        (
            "cd-relative",
            format!("cd {} && echo x > relative", probe.outside.display()),
        ),
        (
            "symlink",
            format!(
                "ln -s {} link && echo x > link/through-symlink",
                probe.outside.display()
            ),
        ),
        (
            "dotdot",
            "mkdir -p a/b && echo x > a/b/../../../outside/dotdot".to_owned(),
        ),
        (
            "proc-cwd",
            format!(
                "cd {} && echo x > /proc/self/cwd/proc-cwd",
                probe.outside.display()
            ),
        ),
        (
            "proc-root",
            format!("echo x > /proc/$$/root{}", probe.out("proc-root")),
        ),
        (
            "grandchild",
            format!("sh -c 'sh -c \"echo x > {}\"'", probe.out("grandchild")),
        ),
        (
            "new-session",
            format!("setsid -w sh -c 'echo x > {}'", probe.out("detached")),
        ),
        (
            "python",
            format!("python3 -c \"open('{}', 'w').write('x')\"", probe.out("python")),
        ),
        (
            "rename-out",
            format!("echo x > to-move && mv to-move {}", probe.out("renamed")),
        ),
        (
            "hard-link",
            format!("ln {} hard && echo x >> hard", probe.out("existing")),
        ),
        ("truncate", format!("truncate -s 0 {}", probe.out("existing"))),
        ("overwrite", format!("echo x > {}", probe.out("existing"))),
        ("share-dir", format!("echo x > {share}/pwned")),
        ("home", "echo x > \"$HOME/pwned\"".to_owned()),
    ];
    let inside = "echo ok > inside.txt && mkdir -p d && mv inside.txt d/ && git init -q && git add -A \
                  && git -c user.name=t -c user.email=t@example.com commit -qm first \
                  && echo tmp > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo gone > /dev/null \
                  && git log --oneline | wc -l";
    let mut lines: Vec<String> = attempts
        .iter()
        .map(|(id, command)| shell_call_line(id, command))
        .collect();
    lines.push(shell_call_line("inside", inside));
    // git_diff's git runs confined too, and reads the repository just made.
    lines.push(tool_call_line("diff", "git_diff", Some("{}")));
    lines.push("text: done".to_owned());
    let scripts: Vec<&str> = lines.iter().map(String::as_str).collect();
    let sandboxed = probe.scripted(&scripts, json!({"sandbox_mode": "workspace-write"}))?;
    let mut wire = sandboxed.spawn(&[]).await?;
    let sandbox = initialize_enforced(&mut wire).await?;
    let real = |p: &Path| std::fs::canonicalize(p).map(|p| p.display().to_string());
    let mut roots = vec![real(&sandboxed.work())?, real(&sandboxed.tmp)?];
    if Path::new("/dev/shm").is_dir() {
        roots.push(real(Path::new("/dev/shm"))?);
    }
    assert_eq!(sandbox["mode"], "workspace-write");
    assert_eq!(sandbox["writable_roots"], json!(roots));

    let (response, events) = wire.prompt(json!("try to get out")).await?;
    assert_eq!(response["result"]["status"], "finished");
    for (id, command) in &attempts {
        let result = result_of(&events, id)?;
        assert_eq!(
            result["is_error"], true,
            "{id}: `{command}` was not refused: {result}"
        );
    }
    sandboxed.outside_untouched()?;
    assert!(
        !sandboxed.home.share().join("pwned").exists(),
        "the share dir was written"
    );
    assert!(!sandboxed.home.home().join("pwned").exists(), "HOME was written");
    let inside = result_of(&events, "inside")?;
    assert_eq!(inside["is_error"], false, "{inside}");
    assert_eq!(text(inside, "output"), "tmp\n1\n");
    assert!(sandboxed.work().join("d/inside.txt").is_file());
    assert!(sandboxed.work().join(".git/HEAD").is_file());
    let diff = result_of(&events, "diff")?;
    assert_eq!(
        text(diff, "message"),
        "No differences: unstaged changes in the working tree.",
        "{diff}"
    );
    Ok(())
}

#[tokio::test]
async fn a_background_task_is_confined_too() -> Result<()> {
    let model = MockModel::start(|n, messages| match n {
        0 => crate::suite::background::background_shell(
            "tc-bg",
            "echo started > /dev/stdout; echo x > ../outside/background",
            "escape",
        ),
        1 => {
            let id = crate::suite::background::reported_task(messages, "tc-bg");
            Reply::call(
                "tc-out",
                "TaskOutput",
                json!({"task_id": id, "block": true, "timeout": 20}),
            )
        }
        _ => Reply::Text("done".into()),
    })
    .await;
    let sandboxed = Sandboxed::new()?.mocked(&model, json!({"sandbox_mode": "workspace-write"}))?;
    let mut wire = sandboxed.spawn(&[]).await?;
    initialize_enforced(&mut wire).await?;
    let (response, events) = wire.prompt(json!("escape in the background")).await?;
    assert_eq!(response["result"]["status"], "finished");
    let output = text(result_of(&events, "tc-out")?, "output");
    assert!(output.contains("\nstatus: failed\n"), "{output}");
    // It could still reopen its own log through /dev/stdout, and nothing else.
    assert!(output.contains("\n[output]\nstarted\n"), "{output}");
    assert!(output.contains("Permission denied"), "{output}");
    sandboxed.outside_untouched()
}

#[tokio::test]
async fn file_tools_write_only_inside_the_writable_roots() -> Result<()> {
    let write = |id: &str, path: &str| {
        tool_call_line(
            id,
            "WriteFile",
            Some(&json!({"path": path, "content": "x"}).to_string()),
        )
    };
    let probe = Sandboxed::new()?;
    let outside_file = probe.out("written");
    let existing = probe.out("existing");
    let edit = tool_call_line(
        "edit-outside",
        "StrReplaceFile",
        Some(&json!({"path": existing, "edit": {"old": ORIGINAL, "new": "changed"}}).to_string()),
    );
    let lines = [
        write("outside", &outside_file),
        write("through-link", "link/written"),
        edit,
        write("inside", "inside.txt"),
        "text: done".to_owned(),
    ];
    let scripts: Vec<&str> = lines.iter().map(String::as_str).collect();
    let sandboxed = probe.scripted(&scripts, json!({"sandbox_mode": "workspace-write"}))?;
    std::os::unix::fs::symlink(&sandboxed.outside, sandboxed.work().join("link"))?;
    let mut wire = sandboxed.spawn(&[]).await?;
    initialize_enforced(&mut wire).await?;
    let (_, events) = wire.prompt(json!("write")).await?;
    let work = std::fs::canonicalize(sandboxed.work())?;
    for id in ["outside", "through-link", "edit-outside"] {
        let result = result_of(&events, id)?;
        assert_eq!(result["is_error"], true, "{id}: {result}");
        let message = text(result, "message");
        assert!(
            message.contains("is outside the sandbox's writable roots (workspace-write): ")
                && message.contains(&work.display().to_string())
                && message.contains(&sandboxed.tmp.display().to_string()),
            "{id}: {message}"
        );
        assert_eq!(
            result["display"],
            json!([{"type": "brief", "text": "Outside the sandbox"}]),
            "{id}"
        );
    }
    assert!(
        text(result_of(&events, "through-link")?, "message")
            .starts_with(&format!("`{}` is outside", sandboxed.out("written"))),
        "the refusal names where the write would really land"
    );
    sandboxed.outside_untouched()?;
    assert_eq!(result_of(&events, "inside")?["is_error"], false);
    assert_eq!(std::fs::read_to_string(sandboxed.work().join("inside.txt"))?, "x");
    Ok(())
}

#[tokio::test]
async fn the_kimi_code_agents_bash_and_write_are_confined_the_same_way() -> Result<()> {
    let probe = Sandboxed::new()?;
    let call = |id: &str, tool: &str, args: Value| tool_call_line(id, tool, Some(&args.to_string()));
    let outside = probe.outside.display().to_string();
    let lines = [
        call(
            "bash-out",
            "Bash",
            json!({"command": format!("echo x > {}", probe.out("bash"))}),
        ),
        // A `cwd` outside the workspace runs the command there, and makes nothing there writable.
        call(
            "bash-cwd",
            "Bash",
            json!({"command": "echo x > from-cwd", "cwd": outside}),
        ),
        call(
            "write-out",
            "Write",
            json!({"path": probe.out("write"), "content": "x"}),
        ),
        call(
            "bash-in",
            "Bash",
            json!({"command": "echo ok > inside.txt && cat inside.txt"}),
        ),
        "text: done".to_owned(),
    ];
    let scripts: Vec<&str> = lines.iter().map(String::as_str).collect();
    let sandboxed = probe.scripted(&scripts, json!({}))?;
    let mut wire = sandboxed
        .spawn(&["--agent", "kimi-code", "--sandbox", "workspace-write"])
        .await?;
    initialize_enforced(&mut wire).await?;
    let (response, events) = wire.prompt(json!("get out")).await?;
    assert_eq!(response["result"]["status"], "finished");
    for id in ["bash-out", "bash-cwd"] {
        let result = result_of(&events, id)?;
        assert_eq!(result["is_error"], true, "{id}: {result}");
        assert!(
            text(result, "output").contains("Permission denied"),
            "{id}: {result}"
        );
    }
    let written = result_of(&events, "write-out")?;
    assert_eq!(
        written["display"],
        json!([{"type": "brief", "text": "Outside the sandbox"}]),
        "{written}"
    );
    let inside = result_of(&events, "bash-in")?;
    assert_eq!(
        (inside["is_error"].clone(), text(inside, "output")),
        (json!(false), "ok\n".to_owned())
    );
    sandboxed.outside_untouched()
}

#[tokio::test]
async fn in_plan_mode_the_plan_file_stays_writable() -> Result<()> {
    let model = MockModel::start(|n, messages| match n {
        0 => Reply::call(
            "tc-find",
            "WriteFile",
            json!({"path": "notes.txt", "content": "x"}),
        ),
        1 => {
            // The plan-mode refusal names the plan file.
            let refusal = tool_result(messages, "tc-find").unwrap_or_default();
            let plan = refusal.split('`').nth(1).unwrap_or_default().to_owned();
            Reply::call(
                "tc-plan",
                "WriteFile",
                json!({"path": plan, "content": "# the plan"}),
            )
        }
        _ => Reply::Text("planned".into()),
    })
    .await;
    let sandboxed = Sandboxed::new()?.mocked(&model, json!({"sandbox_mode": "workspace-write"}))?;
    let mut wire = sandboxed.spawn(&[]).await?;
    initialize_enforced(&mut wire).await?;
    // WriteFile wants the parent to exist; the plan directory is the agent's own, outside every root.
    let plans = sandboxed.home.home().join(".kimi/plans");
    std::fs::create_dir_all(&plans)?;
    let id = wire.request("set_plan_mode", json!({"enabled": true})).await?;
    wire.read_response(&id).await?;
    let (_, events) = wire.prompt(json!("plan")).await?;
    let plan = result_of(&events, "tc-plan")?;
    assert_eq!(plan["is_error"], false, "{plan}");
    let written: Vec<String> = crate::common::dir_names(&plans)?
        .iter()
        .map(|name| std::fs::read_to_string(plans.join(name)).unwrap_or_default())
        .collect();
    assert_eq!(written, ["# the plan"]);
    Ok(())
}

/// The sandbox reminders in `messages`' user messages.
fn sandbox_reminders(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| {
            message_text(m)
                .split("<system-reminder>\n")
                .skip(1)
                .filter(|block| block.starts_with("Sandbox: "))
                .map(|block| {
                    block
                        .split("\n</system-reminder>")
                        .next()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test]
async fn the_model_is_told_where_it_may_write_and_that_it_has_no_network() -> Result<()> {
    let model = MockModel::start(|_, _| Reply::Text("ok".into())).await;
    let sandboxed = Sandboxed::new()?.mocked(
        &model,
        json!({"sandbox_mode": "workspace-write", "sandbox_network": false}),
    )?;
    let mut wire = sandboxed.spawn(&["--agent", "kimi-code"]).await?;
    let sandbox = initialize_enforced(&mut wire).await?;
    wire.prompt(json!("one")).await?;
    wire.prompt(json!("two")).await?;
    let requests = model.requests().await;
    ensure!(requests.len() == 2, "{} requests", requests.len());
    let told = sandbox_reminders(&requests[0]);
    ensure!(told.len() == 1, "told {told:?}");
    let told = &told[0];
    assert!(
        told.starts_with("Sandbox: workspace-write, network off. The commands you run with Bash"),
        "{told}"
    );
    // Every writable root the client was shown, the work dir first; and the network.
    let roots: Vec<String> = sandbox["writable_roots"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|root| format!("`{}`", root.as_str().unwrap_or_default()))
        .collect();
    ensure!(
        roots.first() == Some(&format!("`{}`", sandboxed.work().display())),
        "{roots:?}"
    );
    assert!(
        told.contains(&format!("may write only in: {}.", roots.join(", "))),
        "{told}"
    );
    assert!(told.contains("Commands have no network"), "{told}");
    // Told once: the next turn's request carries the same reminder, not a second one.
    assert_eq!(sandbox_reminders(&requests[1]), vec![told.clone()]);

    // Without a sandbox the model is told nothing.
    let unconfined = MockModel::start(|_, _| Reply::Text("ok".into())).await;
    let plain = Sandboxed::new()?.mocked(&unconfined, json!({}))?;
    let mut wire = plain.spawn(&[]).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    wire.prompt(json!("one")).await?;
    let requests = unconfined.requests().await;
    assert_eq!(requests.len(), 1);
    assert_eq!(sandbox_reminders(&requests[0]), Vec::<String>::new());
    Ok(())
}

/// A subagent's commands are confined as the root agent's are: its model is told the same (and,
/// without a sandbox, nothing), while plan mode and afk stay the root agent's business.
#[tokio::test]
async fn a_subagents_model_is_told_about_the_sandbox_too() -> Result<()> {
    let model = MockModel::start(|_, messages| {
        let first_user = messages
            .iter()
            .find(|m| m["role"] == "user")
            .map(message_text)
            .unwrap_or_default();
        if first_user.contains("SUBTASK") {
            // Long enough a summary that the subagent is not asked for more.
            return Reply::Text(format!("Looked around: {}", "all is well. ".repeat(20)));
        }
        match tool_result(messages, "tc-agent") {
            None => Reply::call(
                "tc-agent",
                "Agent",
                json!({"description": "look", "prompt": "SUBTASK: look around", "subagent_type": "explore"}),
            ),
            Some(_) => Reply::Text("done".into()),
        }
    })
    .await;
    let sandboxed = Sandboxed::new()?.mocked(
        &model,
        json!({"sandbox_mode": "workspace-write", "sandbox_network": false}),
    )?;
    let mut wire = sandboxed.spawn(&[]).await?;
    initialize_enforced(&mut wire).await?;
    let (response, _) = wire.prompt(json!("delegate")).await?;
    assert_eq!(response["result"]["status"], "finished");
    let requests = model.requests().await;
    let (sub, root): (Vec<_>, Vec<_>) = requests.iter().partition(|r| {
        r.iter()
            .find(|m| m["role"] == "user")
            .is_some_and(|m| message_text(m).contains("SUBTASK"))
    });
    ensure!(
        sub.len() == 1 && root.len() == 2,
        "{} / {}",
        sub.len(),
        root.len()
    );
    let told_root = sandbox_reminders(root[0]);
    let told_sub = sandbox_reminders(sub[0]);
    ensure!(told_root.len() == 1, "root told {told_root:?}");
    assert_eq!(told_sub, told_root);
    Ok(())
}

/// A TCP listener on the host's loopback, and the bash line that connects to it.
fn listener() -> Result<(std::net::TcpListener, String)> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let port = listener.local_addr()?.port();
    Ok((
        listener,
        format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"),
    ))
}

/// Whether a connection is waiting on `listener` (the command that would have made it has ended).
fn was_connected(listener: &std::net::TcpListener) -> bool {
    listener.accept().is_ok()
}

#[tokio::test]
async fn with_the_network_off_the_hosts_loopback_is_out_of_reach() -> Result<()> {
    let (listener, connect) = listener()?;
    // Inside, the command has a loopback of its own: a server and a client within it still work.
    let private = "python3 -c \"import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); \
                   socket.create_connection(s.getsockname()); print('private loopback ok')\"";
    // Commands share the session's private network: a server started in the background answers a later
    // command (which waits, bounded by its timeout, for the server's `ready` file).
    let server = json!({
        "command": "python3 -c \"import socket; s = socket.socket(); s.bind(('127.0.0.1', 47123)); \
                    s.listen(); open('ready', 'w').close(); c, _ = s.accept(); c.sendall(b'from the background')\"",
        "run_in_background": true,
        "description": "server",
        "timeout": 30,
    });
    let client = json!({
        "command": "until [ -e ready ]; do sleep 0.01; done; exec 3<>/dev/tcp/127.0.0.1/47123; cat <&3",
        "timeout": 15,
    });
    let lines = [
        shell_call_line("connect", &connect),
        shell_call_line("private", private),
        tool_call_line("server", "Shell", Some(&server.to_string())),
        tool_call_line("client", "Shell", Some(&client.to_string())),
        "text: done".to_owned(),
    ];
    let scripts: Vec<&str> = lines.iter().map(String::as_str).collect();
    let sandboxed = Sandboxed::new()?.scripted(
        &scripts,
        json!({"sandbox_mode": "workspace-write", "sandbox_network": false}),
    )?;
    let mut wire = sandboxed.spawn(&[]).await?;
    let sandbox = initialize_enforced(&mut wire).await?;
    assert_eq!(sandbox["network"], false);
    let (_, events) = wire.prompt(json!("connect")).await?;
    let refused = result_of(&events, "connect")?;
    assert_eq!(refused["is_error"], true, "{refused}");
    assert!(
        !was_connected(&listener),
        "a connection reached the host's loopback"
    );
    let private = result_of(&events, "private")?;
    assert_eq!(
        (private["is_error"].clone(), text(private, "output")),
        (json!(false), "private loopback ok\n".to_owned()),
        "{private}"
    );
    let client = result_of(&events, "client")?;
    assert_eq!(
        (client["is_error"].clone(), text(client, "output")),
        (json!(false), "from the background".to_owned()),
        "{client}"
    );
    Ok(())
}

#[tokio::test]
async fn with_the_network_on_the_same_connection_succeeds() -> Result<()> {
    let (listener, connect) = listener()?;
    let lines = [shell_call_line("connect", &connect), "text: done".to_owned()];
    let scripts: Vec<&str> = lines.iter().map(String::as_str).collect();
    let sandboxed = Sandboxed::new()?.scripted(&scripts, json!({"sandbox_mode": "workspace-write"}))?;
    let mut wire = sandboxed.spawn(&[]).await?;
    initialize_enforced(&mut wire).await?;
    let (_, events) = wire.prompt(json!("connect")).await?;
    let connected = result_of(&events, "connect")?;
    assert_eq!(
        (connected["is_error"].clone(), text(connected, "output")),
        (json!(false), "connected\n".to_owned()),
        "{connected}"
    );
    assert!(was_connected(&listener));
    Ok(())
}

#[tokio::test]
async fn with_the_network_off_the_web_tools_are_not_offered() -> Result<()> {
    let model = MockModel::start(|_, _| Reply::Text("ok".into())).await;
    let sandboxed = Sandboxed::new()?.mocked(&model, json!({"sandbox_network": false}))?;
    let mut wire = sandboxed.spawn(&[]).await?;
    let sandbox = initialize_enforced(&mut wire).await?;
    // Files are not confined in the default mode; only the network is cut.
    assert_eq!(
        (sandbox["mode"].clone(), sandbox["writable_roots"].clone()),
        (json!("danger-full-access"), Value::Null)
    );
    wire.prompt(json!("hi")).await?;
    let requests = model.server.received_requests().await.unwrap_or_default();
    let body: Value = serde_json::from_slice(&requests.first().context("no model request")?.body)?;
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(tools.contains(&"Shell"), "{tools:?}");
    assert!(
        !tools.contains(&"FetchURL") && !tools.contains(&"SearchWeb"),
        "{tools:?}"
    );
    Ok(())
}

#[tokio::test]
async fn read_only_mode_writes_only_in_a_private_temp_dir() -> Result<()> {
    let write = json!({"path": "inside.txt", "content": "x"}).to_string();
    let lines = [
        shell_call_line("work", "echo x > inside.txt"),
        shell_call_line("system-tmp", "echo x > ../tmp/t"),
        shell_call_line(
            "private-tmp",
            "echo ok > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo \"$TMPDIR\"",
        ),
        tool_call_line("write-file", "WriteFile", Some(&write)),
        // Reading works: git_diff's confined git shows a change without writing the index.
        tool_call_line("diff", "git_diff", Some("{}")),
        "text: done".to_owned(),
    ];
    let scripts: Vec<&str> = lines.iter().map(String::as_str).collect();
    let sandboxed = Sandboxed::new()?.scripted(&scripts, json!({}))?;
    let work = sandboxed.work();
    std::fs::write(work.join("tracked.txt"), "before\n")?;
    for args in [
        &["init", "-q"][..],
        &["add", "tracked.txt"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-qm",
            "first",
        ],
    ] {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(&work)
            .status()?;
        ensure!(status.success(), "git {args:?} failed");
    }
    std::fs::write(work.join("tracked.txt"), "after\n")?;
    let mut wire = sandboxed.spawn(&["--sandbox", "read-only"]).await?;
    let sandbox = initialize_enforced(&mut wire).await?;
    let roots = sandbox["writable_roots"].as_array().cloned().unwrap_or_default();
    assert_eq!(roots.len(), 1, "{sandbox}");
    let private = roots[0].as_str().unwrap_or_default().to_owned();
    assert!(
        Path::new(&private).starts_with(&sandboxed.tmp) && Path::new(&private) != sandboxed.tmp,
        "{private}"
    );
    let (_, events) = wire.prompt(json!("write")).await?;
    for id in ["work", "system-tmp", "write-file"] {
        assert_eq!(result_of(&events, id)?["is_error"], true, "{id}");
    }
    assert!(!sandboxed.work().join("inside.txt").exists());
    assert!(!sandboxed.tmp.join("t").exists());
    let ok = result_of(&events, "private-tmp")?;
    assert_eq!(text(ok, "output"), format!("ok\n{private}\n"), "{ok}");
    let diff = result_of(&events, "diff")?;
    assert!(
        diff["is_error"] == false && text(diff, "output").contains("-before\n+after\n"),
        "{diff}"
    );
    // The private temp dir goes away with the agent.
    wire.wait_exit().await?;
    assert!(!Path::new(&private).exists());
    Ok(())
}

#[tokio::test]
async fn a_sandbox_the_kernel_cannot_enforce_refuses_every_command_and_says_so() -> Result<()> {
    let lines = [
        shell_call_line("fg", "touch ran-unconfined"),
        tool_call_line(
            "bg",
            "Shell",
            Some(
                &json!({"command": "touch ran-in-background", "run_in_background": true, "description": "d"})
                    .to_string(),
            ),
        ),
        // Not even git_diff's read-only git runs unconfined.
        tool_call_line("diff", "git_diff", Some("{}")),
        "text: done".to_owned(),
    ];
    let scripts: Vec<&str> = lines.iter().map(String::as_str).collect();
    let sandboxed = Sandboxed::new()?.scripted(&scripts, json!({"sandbox_mode": "read-only"}))?;
    // Read-only mode needs a private temp dir; with TMPDIR missing there is none, so nothing may run.
    let missing = sandboxed.tmp.join("missing");
    let mut wire = sandboxed.spawn_with_tmpdir(&[], &missing).await?;
    let result = wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let sandbox = &result["sandbox"];
    assert_eq!(
        (sandbox["mode"].clone(), sandbox["enforced"].clone()),
        (json!("read-only"), json!(false))
    );
    let error = text(sandbox, "error");
    assert!(
        error.starts_with("cannot create the private temp dir: "),
        "{error}"
    );

    let (_, events) = wire.prompt(json!("run")).await?;
    for id in ["fg", "bg", "diff"] {
        let refused = result_of(&events, id)?;
        assert_eq!(refused["is_error"], true, "{id}");
        let message = text(refused, "message");
        assert!(
            message.starts_with(
                "The sandbox (read-only, network on) cannot be enforced on this machine, so the command \
                 was not run: cannot create the private temp dir: "
            ),
            "{id}: {message}"
        );
        assert_eq!(
            refused["display"],
            json!([{"type": "brief", "text": "Sandbox unavailable"}])
        );
    }
    assert_eq!(crate::common::dir_names(&sandboxed.work())?, Vec::<String>::new());
    wire.wait_exit().await?;
    let log = std::fs::read_to_string(sandboxed.home.share().join("logs/kimi.log"))?;
    assert!(
        log.contains("sandbox: read-only, network on (NOT ENFORCEABLE: cannot create the private temp dir"),
        "{log}"
    );
    Ok(())
}

#[tokio::test]
async fn a_process_that_does_not_hold_the_session_reports_the_same_sandbox() -> Result<()> {
    let sandboxed = Sandboxed::new()?.scripted(&["text: first"], json!({"sandbox_network": false}))?;
    let extra = sandboxed.tmp.join("extra");
    std::fs::create_dir_all(&extra)?;
    let extra = extra.display().to_string();
    let args = [
        "--sandbox",
        "workspace-write",
        "--session",
        "shared",
        "--add-dir",
        extra.as_str(),
    ];
    let mut holder = sandboxed.spawn(&args).await?;
    let held = initialize_enforced(&mut holder).await?;
    let (done, _) = holder.prompt(json!("one")).await?;
    assert_eq!(done["result"]["status"], "finished");

    let mut second = sandboxed.spawn(&args).await?;
    let result = second.initialize(json!({"protocol_version": "1.10"})).await?;
    let holder_pid = holder.child.id().context("the holder has no pid")?;
    assert_eq!(result["session_held_by"], json!({"pid": holder_pid}), "{result}");
    assert_eq!(
        (held["mode"].clone(), held["network"].clone()),
        (json!("workspace-write"), json!(false))
    );
    let roots = held["writable_roots"].as_array().cloned().unwrap_or_default();
    assert!(roots.contains(&json!(extra)), "{held}");
    // What only reads reports the sandbox the holder's commands run under.
    assert_eq!(result["sandbox"], held);
    Ok(())
}

/// The parent and process group of `pid`, from `/proc/<pid>/stat`.
fn parent_and_group(pid: u32) -> Result<(u32, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after_name = stat.rsplit_once(')').context("stat without a name")?.1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    Ok((fields[1].parse()?, fields[2].parse()?))
}

#[tokio::test]
async fn a_cancelled_confined_command_takes_its_whole_group_with_it() -> Result<()> {
    // The leader records itself, a grandchild that ignores SIGTERM records itself, and both wait.
    let command =
        "sh -c 'trap \"\" TERM; echo $$ > sleeper.pid; exec sleep 1000' & echo $$ > leader.pid; wait";
    let lines = [shell_call_line("tc-1", command), "text: never".to_owned()];
    let scripts: Vec<&str> = lines.iter().map(String::as_str).collect();
    let sandboxed = Sandboxed::new()?.scripted(&scripts, json!({"sandbox_mode": "workspace-write"}))?;
    let mut wire = sandboxed.spawn(&[]).await?;
    initialize_enforced(&mut wire).await?;
    let prompt = wire.start_prompt(json!("run it")).await?;
    let leader = crate::common::wait_for_pid(&sandboxed.work().join("leader.pid")).await?;
    let sleeper = crate::common::wait_for_pid(&sandboxed.work().join("sleeper.pid")).await?;
    // Started by the session's spawner, leading a group of its own that holds the grandchild.
    let (parent, group) = parent_and_group(leader)?;
    assert_eq!(group, leader);
    assert_eq!(parent_and_group(sleeper)?.1, leader);
    let parent_cmdline = std::fs::read(format!("/proc/{parent}/cmdline"))?;
    assert!(
        String::from_utf8_lossy(&parent_cmdline).contains("__sandbox-spawner"),
        "the command's parent is not the spawner: {}",
        String::from_utf8_lossy(&parent_cmdline)
    );
    let cancel = wire.request("cancel", json!({})).await?;
    wire.response_to(&cancel).await?;
    let response = wire.response_to(&prompt).await?;
    assert_eq!(response["result"]["status"], "cancelled");
    crate::common::wait_until_gone(sleeper, "the grandchild of the cancelled command").await?;
    crate::common::wait_until_gone(leader, "the cancelled command").await?;
    Ok(())
}

#[tokio::test]
async fn the_default_changes_nothing_and_says_so() -> Result<()> {
    let lines = [
        shell_call_line("outside", "echo x > ../outside/written"),
        "text: done".to_owned(),
    ];
    let scripts: Vec<&str> = lines.iter().map(String::as_str).collect();
    let sandboxed = Sandboxed::new()?.scripted(&scripts, json!({}))?;
    let mut wire = sandboxed.spawn(&[]).await?;
    let result = wire.initialize(json!({"protocol_version": "1.10"})).await?;
    assert_eq!(
        result["sandbox"],
        json!({"mode": "danger-full-access", "network": true, "enforced": false, "landlock_abi": null,
               "writable_roots": null, "error": null})
    );
    let (_, events) = wire.prompt(json!("write")).await?;
    assert_eq!(result_of(&events, "outside")?["is_error"], false);
    assert!(sandboxed.outside.join("written").exists());
    Ok(())
}

#[tokio::test]
async fn info_prints_the_sandbox_in_effect() -> Result<()> {
    let home = TestHome::new()?;
    let output = home.run_cli(&["--sandbox", "workspace-write", "info"]).await?;
    let stdout = String::from_utf8(output.stdout)?;
    let line = stdout
        .lines()
        .find(|l| l.starts_with("sandbox: "))
        .with_context(|| format!("no sandbox line in {stdout}"))?;
    ensure!(
        line.starts_with("sandbox: workspace-write, network on (enforced: Landlock ABI "),
        "THIS MACHINE CANNOT RUN THE SANDBOX TESTS, or info is wrong: {line}"
    );
    let output = home
        .run_cli(&["--config", "sandbox_network = false", "info", "--json"])
        .await?;
    let info: Value = serde_json::from_slice(&output.stdout)?;
    assert_eq!(
        (
            info["sandbox"]["mode"].clone(),
            info["sandbox"]["network"].clone(),
            info["sandbox"]["enforced"].clone()
        ),
        (json!("danger-full-access"), json!(false), json!(true))
    );
    let plain = home.run_cli(&["info"]).await?;
    assert!(
        String::from_utf8(plain.stdout)?
            .ends_with("sandbox: danger-full-access, network on (no confinement)\n")
    );
    // Reading the configuration for that line writes no default file.
    assert!(!home.share().join("config.toml").exists());
    Ok(())
}
