//! seeds/002 "文件类": Read, Write, Edit, Grep, Glob, ReadMediaFile.

use std::time::{Duration, SystemTime};

use anyhow::Result;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::{calling, kimi_code, not_found, turn, turn_answering};
use crate::common::TestHome;

/// A PNG signature and header: enough for the file to be recognised as a 1x1 image.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89";

fn set_mtime(path: &std::path::Path, secs: u64) -> Result<()> {
    let file = std::fs::File::options().write(true).open(path)?;
    file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))?;
    Ok(())
}

#[tokio::test]
async fn read_pages_with_line_offset_and_points_media_to_read_media_file() -> Result<()> {
    let home = calling(&[
        ("r-1", "Read", json!({"path": "notes.txt", "line_offset": -2})),
        (
            "r-2",
            "Read",
            json!({"path": "notes.txt", "line_offset": 2, "n_lines": 1}),
        ),
        ("r-3", "Read", json!({"path": "pic.png"})),
        ("r-4", "ReadFile", json!({"path": "notes.txt"})),
    ])?;
    std::fs::write(home.work().join("notes.txt"), "one\ntwo\nthree\n")?;
    std::fs::write(home.work().join("pic.png"), PNG)?;
    let (_home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "read").await?;
    // Read is allowed without asking.
    assert_eq!(turn.actions(), Vec::<String>::new());
    assert_eq!(turn.output("r-1")?, "     2\ttwo\n     3\tthree\n");
    assert_eq!(turn.output("r-2")?, "     2\ttwo\n");
    assert!(
        turn.message("r-2")?
            .starts_with("1 lines read from file starting from line 2. Total lines in file: 3."),
        "{}",
        turn.message("r-2")?
    );
    assert_eq!(turn.result("r-3")?["is_error"], json!(true));
    assert_eq!(
        turn.message("r-3")?,
        "`pic.png` is a image file. Use ReadMediaFile to read image or video files."
    );
    // The reference's names are not this agent's tools.
    assert_eq!(turn.message("r-4")?, not_found("ReadFile"));
    Ok(())
}

#[tokio::test]
async fn read_returns_at_most_1000_lines_or_100_kb() -> Result<()> {
    let home = calling(&[
        ("r-1", "Read", json!({"path": "long.txt"})),
        ("r-2", "Read", json!({"path": "wide.txt"})),
    ])?;
    let long: String = (1..=1500).map(|i| format!("{i}\n")).collect();
    std::fs::write(home.work().join("long.txt"), long)?;
    let wide = format!("{}\n", "w".repeat(1900)).repeat(80);
    std::fs::write(home.work().join("wide.txt"), wide)?;
    let (_home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "read").await?;
    assert_eq!(turn.output("r-1")?.lines().count(), 1000);
    assert_eq!(
        turn.message("r-1")?,
        "1000 lines read from file starting from line 1. Total lines in file: 1500."
    );
    // 54 lines of 1901 bytes pass 100 KB (102400 bytes); 53 do not.
    assert_eq!(turn.output("r-2")?.lines().count(), 54);
    assert_eq!(
        turn.message("r-2")?,
        "54 lines read from file starting from line 1. Total lines in file: 80. Max 102400 bytes reached."
    );
    Ok(())
}

#[tokio::test]
async fn write_asks_overwrites_appends_and_needs_an_existing_parent() -> Result<()> {
    let home = calling(&[
        ("w-1", "Write", json!({"path": "a.txt", "content": "first"})),
        (
            "w-2",
            "Write",
            json!({"path": "a.txt", "content": "+more", "mode": "append"}),
        ),
        ("w-3", "Write", json!({"path": "missing/b.txt", "content": "x"})),
        ("w-4", "WriteFile", json!({"path": "c.txt", "content": "x"})),
    ])?;
    let (home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "write").await?;
    assert_eq!(turn.actions(), ["edit file", "edit file"]);
    assert_eq!(std::fs::read_to_string(home.work().join("a.txt"))?, "first+more");
    assert_eq!(turn.result("w-3")?["is_error"], json!(true));
    assert_eq!(
        turn.message("w-3")?,
        "`missing/b.txt` parent directory does not exist."
    );
    assert!(!home.work().join("missing").exists());
    assert_eq!(turn.message("w-4")?, not_found("WriteFile"));
    Ok(())
}

#[tokio::test]
async fn a_rejected_write_changes_nothing() -> Result<()> {
    let home = calling(&[("w-1", "Write", json!({"path": "a.txt", "content": "x"}))])?;
    let (home, mut wire) = kimi_code(home).await?;
    let turn = turn_answering(&mut wire, "write", "reject").await?;
    assert_eq!(turn.actions(), ["edit file"]);
    assert_eq!(turn.result("w-1")?["is_error"], json!(true));
    assert!(!home.work().join("a.txt").exists());
    Ok(())
}

#[tokio::test]
async fn edit_replaces_one_match_and_names_its_own_parameters_in_errors() -> Result<()> {
    let home = calling(&[
        (
            "e-1",
            "Edit",
            json!({"path": "f.rs", "old_string": "let a = 1;", "new_string": "let a = 2;"}),
        ),
        (
            "e-2",
            "Edit",
            json!({"path": "f.rs", "old_string": "x", "new_string": "y"}),
        ),
        (
            "e-3",
            "Edit",
            json!({"path": "f.rs", "old_string": "b", "new_string": "b"}),
        ),
        (
            "e-4",
            "Edit",
            json!({"path": "f.rs", "old_string": "x", "new_string": "z", "replace_all": true}),
        ),
        (
            "e-5",
            "StrReplaceFile",
            json!({"path": "f.rs", "edit": {"old": "a", "new": "b"}}),
        ),
    ])?;
    std::fs::write(home.work().join("f.rs"), "let a = 1;\nx\nx\nb\n")?;
    let (home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "edit").await?;
    // Only the calls that change something ask.
    assert_eq!(turn.actions(), ["edit file", "edit file"]);
    assert_eq!(turn.result("e-1")?["is_error"], json!(false));
    assert_eq!(
        turn.message("e-2")?,
        "`old_string` was found 2 times (starting on lines 2, 3), and without `replace_all` it must match \
         exactly once. Include more of the surrounding text in `old_string` so it matches only the place \
         you mean, or set `replace_all` to true to replace every occurrence. Nothing was changed."
    );
    assert_eq!(
        turn.message("e-3")?,
        "`old_string` and `new_string` are the same text, so nothing would change. Put the text the file \
         should contain in `new_string`."
    );
    assert_eq!(
        std::fs::read_to_string(home.work().join("f.rs"))?,
        "let a = 2;\nz\nz\nb\n"
    );
    assert_eq!(turn.message("e-5")?, not_found("StrReplaceFile"));
    Ok(())
}

#[tokio::test]
async fn grep_lists_matching_files_newest_first_and_hides_secrets() -> Result<()> {
    let home = calling(&[
        ("g-1", "Grep", json!({"pattern": "needle"})),
        (
            "g-2",
            "Grep",
            json!({"pattern": "NEEDLE", "output_mode": "content", "-i": true, "glob": "*.rs"}),
        ),
        (
            "g-3",
            "Grep",
            json!({"pattern": "needle", "output_mode": "count_matches", "head_limit": 1}),
        ),
    ])?;
    let work = home.work();
    for (name, secs) in [("old.rs", 1_000), ("new.rs", 3_000), ("mid.txt", 2_000)] {
        std::fs::write(work.join(name), "a needle here\n")?;
        set_mtime(&work.join(name), secs)?;
    }
    std::fs::write(work.join(".env"), "needle=secret\n")?;
    let (_home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "grep").await?;
    assert_eq!(turn.actions(), Vec::<String>::new());
    // Paths as rg prints them under the default `.`; `.env` is never listed.
    assert_eq!(turn.output("g-1")?, "./new.rs\n./mid.txt\n./old.rs");
    assert_eq!(
        turn.output("g-2")?,
        "./new.rs:1:a needle here\n./old.rs:1:a needle here"
    );
    assert!(
        turn.output("g-3")?.starts_with("./mid.txt:1"),
        "{}",
        turn.output("g-3")?
    );
    Ok(())
}

#[tokio::test]
async fn glob_takes_path_sorts_newest_first_and_refuses_wildcard_and_brace_patterns() -> Result<()> {
    let home = calling(&[
        ("l-1", "Glob", json!({"pattern": "**/*.rs", "path": "src"})),
        (
            "l-2",
            "Glob",
            json!({"pattern": "*", "path": "src", "include_dirs": false}),
        ),
        ("l-3", "Glob", json!({"pattern": "**/*"})),
        ("l-4", "Glob", json!({"pattern": "src/*.{rs,toml}"})),
        ("l-5", "Glob", json!({"pattern": "*.rs", "directory": "/"})),
        ("l-6", "Glob", json!({"pattern": "src/*"})),
    ])?;
    let work = home.work();
    std::fs::write(work.join("top.rs"), "")?;
    std::fs::create_dir_all(work.join("src/deep"))?;
    for (name, secs) in [("src/a.rs", 1_000), ("src/deep/b.rs", 3_000), ("src/c.rs", 2_000)] {
        std::fs::write(work.join(name), "")?;
        set_mtime(&work.join(name), secs)?;
    }
    let (_home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "glob").await?;
    assert_eq!(turn.actions(), Vec::<String>::new());
    assert_eq!(turn.output("l-1")?, "deep/b.rs\nc.rs\na.rs");
    assert_eq!(turn.output("l-2")?, "c.rs\na.rs");
    assert_eq!(turn.result("l-3")?["is_error"], json!(true));
    assert!(
        turn.message("l-3")?
            .starts_with("Pattern `**/*` is made only of wildcards"),
        "{}",
        turn.message("l-3")?
    );
    assert!(
        turn.message("l-4")?
            .starts_with("Pattern `src/*.{rs,toml}` uses brace expansion, which Glob does not support"),
        "{}",
        turn.message("l-4")?
    );
    // seeds/002's Glob has `path`, not the reference's `directory` (an unknown key is ignored): the
    // search runs in the work dir, whose only top-level `.rs` file is `top.rs` (`/` has none).
    assert_eq!(turn.output("l-5")?, "top.rs");
    // `include_dirs` is true by default: the directory is listed beside the files (it is the newest,
    // its mtime being when `b.rs` was written into it).
    assert_eq!(turn.output("l-6")?, "src/deep\nsrc/c.rs\nsrc/a.rs");
    Ok(())
}

#[tokio::test]
async fn read_media_file_sends_an_image_to_a_model_that_sees() -> Result<()> {
    let first = super::step(&[
        ("m-1", "ReadMediaFile", json!({"path": "pic.png"})),
        ("m-2", "ReadMediaFile", json!({"path": "notes.txt"})),
    ]);
    let home = TestHome::new()?.scripted_with(
        &[first.as_str(), "text: done"],
        json!({"capabilities": ["image_in"]}),
    )?;
    std::fs::write(home.work().join("pic.png"), PNG)?;
    std::fs::write(home.work().join("notes.txt"), "text")?;
    let (_home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "look").await?;
    assert_eq!(turn.actions(), Vec::<String>::new());
    let parts = turn.result("m-1")?["output"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        parts.iter().any(|p| p["type"] == "image_url"
            && p["image_url"]["url"]
                .as_str()
                .is_some_and(|u| u.starts_with("data:image/png;base64,"))),
        "{parts:?}"
    );
    assert_eq!(turn.result("m-2")?["is_error"], json!(true));
    // The reference's text names ReadFile; this agent reads text with Read.
    assert_eq!(
        turn.message("m-2")?,
        "`notes.txt` is a text file. Use Read to read text files."
    );
    Ok(())
}

#[tokio::test]
async fn read_media_file_is_not_offered_to_a_text_only_model() -> Result<()> {
    let home = calling(&[("m-1", "ReadMediaFile", json!({"path": "pic.png"}))])?;
    let (_home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "look").await?;
    assert_eq!(turn.message("m-1")?, not_found("ReadMediaFile"));
    Ok(())
}
