//! `ReadMediaFile`: hands an image or video file to the model as a `data:` URL content part.
//!
//! Reference: `kimi_cli/tools/file/read_media.py`. Only offered when the model accepts images or
//! videos ([`ReadMediaFile::new`] returns `None` otherwise, as the reference skips the tool). The
//! output is the media part between `<image path="...">` / `</image>` text parts (`video` for
//! videos); the message gives the MIME type, the size and, for common image formats, the pixel size.
//!
//! The reference uploads videos through the Kimi files API when the provider is Kimi; we always send a
//! `data:` URL, which is what it does for every other provider.

use std::io::Read;
use std::sync::Arc;

use futures::future::BoxFuture;
use kimi_core::Environment;
use kimi_core::{CallContext, Plan, Tool, parse_args};
use kimi_llm::ToolSpec;
use kimi_wire::message::{ContentPart, ImageUrlPart, MediaUrl, ToolReturnValue, VideoUrlPart};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::access::admit_read;
use super::file_type::{FileKind, detect_file_type};
use super::paths::resolve_tool_path;
use super::read::{Checked, open_checked, read_header};
use super::scope::Target;
use super::{FileSettings, blocking, tool_error, tool_spec};

/// Largest file accepted, in MiB.
pub const MAX_MEDIA_MEGABYTES: u64 = 100;

// Arguments of `ReadMediaFile` (field doc comments are the parameter descriptions).
#[derive(Debug, Deserialize, JsonSchema)]
struct MediaParams {
    /// Image or video file to load. Relative paths start at the working directory; files outside it need an absolute path.
    path: String,
}

/// Shows image and video files to the model.
#[derive(Debug)]
pub struct ReadMediaFile {
    spec: ToolSpec,
    env: Arc<Environment>,
    settings: FileSettings,
    image_in: bool,
    video_in: bool,
}

impl ReadMediaFile {
    /// The tool, or `None` when the model takes neither images nor videos. `capabilities` are the
    /// model's capability names (`image_in`, `video_in`, ...).
    pub fn new<S: AsRef<str>>(
        env: Arc<Environment>,
        settings: FileSettings,
        capabilities: impl IntoIterator<Item = S>,
    ) -> Option<Self> {
        let mut image_in = false;
        let mut video_in = false;
        for capability in capabilities {
            match capability.as_ref() {
                "image_in" => image_in = true,
                "video_in" => video_in = true,
                _ => {}
            }
        }
        if !image_in && !video_in {
            return None;
        }
        let support = match (image_in, video_in) {
            (true, true) => "With the current model it can load both images and videos.",
            (true, false) => "With the current model it can load images; videos are not supported.",
            _ => "With the current model it can load videos; images are not supported.",
        };
        let description = include_str!("descriptions/read_media.md")
            .replace("{MAX_MEDIA_MEGABYTES}", &MAX_MEDIA_MEGABYTES.to_string())
            .replace("{SUPPORT}", support);
        Some(Self {
            spec: tool_spec::<MediaParams>("ReadMediaFile", &description),
            env,
            settings,
            image_in,
            video_in,
        })
    }
}

impl Tool for ReadMediaFile {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        _ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            let params: MediaParams = parse_args(args)?;
            let raw = params.path;
            if raw.is_empty() {
                return Err(tool_error("File path cannot be empty.", "Empty file path"));
            }
            let named = resolve_tool_path(&raw, &self.env, "read")
                .map_err(|message| tool_error(message, "Invalid path"))?;
            let admitted = admit_read(&raw, named, &self.env, &self.settings, |shown| {
                format!("Read media file `{shown}`")
            })
            .await?;
            let target = admitted.target.clone();
            Ok(admitted.plan(Box::pin(async move {
                let shown = raw.clone();
                blocking(move || self.load(&raw, &target))
                    .await
                    .unwrap_or_else(|e| failed(&shown, &e))
            })))
        })
    }
}

fn failed(raw: &str, error: &str) -> ToolReturnValue {
    tracing::warn!(path = raw, error, "ReadMediaFile failed");
    tool_error(
        format!("Failed to read {raw}. Error: {error}"),
        "Failed to read file",
    )
}

impl ReadMediaFile {
    fn load(&self, raw: &str, target: &Target) -> ToolReturnValue {
        let mut file = match open_checked(raw, target) {
            Ok(file) => file,
            Err(Checked::Refused(value)) => return value,
            Err(Checked::Io(e)) => return failed(raw, &e.to_string()),
        };
        let meta = match file.metadata() {
            Ok(meta) => meta,
            Err(e) => return failed(raw, &e.to_string()),
        };
        let header = match read_header(&mut file) {
            Ok(header) => header,
            Err(e) => return failed(raw, &e.to_string()),
        };
        let kind = detect_file_type(&target.named, Some(&header));
        let (tag, mime) = match kind {
            FileKind::Text => {
                return tool_error(
                    format!("`{raw}` is a text file. Use ReadFile to read text files."),
                    "Unsupported file type",
                );
            }
            FileKind::Unknown => {
                return tool_error(
                    format!(
                        "`{raw}` seems not readable as an image or video file. You may need to read it with proper shell commands, Python tools or MCP tools if available. If you read/operate it with Python, you MUST ensure that any third-party packages are installed in a virtual environment (venv)."
                    ),
                    "File not readable",
                );
            }
            FileKind::Image(_) if !self.image_in => {
                return tool_error(
                    "The current model does not support image input. Tell the user to use a model with image input capability.",
                    "Unsupported media type",
                );
            }
            FileKind::Video(_) if !self.video_in => {
                return tool_error(
                    "The current model does not support video input. Tell the user to use a model with video input capability.",
                    "Unsupported media type",
                );
            }
            FileKind::Image(mime) => ("image", mime),
            FileKind::Video(mime) => ("video", mime),
        };
        let shown = target.shown.to_string_lossy().into_owned();
        let size = meta.len();
        if size == 0 {
            return tool_error(format!("`{shown}` is empty."), "Empty file");
        }
        if size > MAX_MEDIA_MEGABYTES << 20 {
            return tool_error(
                format!(
                    "`{shown}` is {size} bytes, which exceeds the max {MAX_MEDIA_MEGABYTES}MB bytes for media files."
                ),
                "File too large",
            );
        }
        let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        if let Err(e) = file.read_to_end(&mut data) {
            return failed(raw, &e.to_string());
        }
        let url = MediaUrl::new(format!("data:{mime};base64,{}", base64(&data)));
        let (part, pixels) = if tag == "image" {
            (
                ContentPart::ImageUrl(ImageUrlPart { image_url: url }),
                image_size(&data),
            )
        } else {
            (ContentPart::VideoUrl(VideoUrlPart { video_url: url }), None)
        };
        let size_hint = pixels
            .map(|(w, h)| format!(", original size {w}x{h}px"))
            .unwrap_or_default();
        let output = vec![
            ContentPart::text(format!("<{tag} path=\"{}\">", escape_attr(&shown))),
            part,
            ContentPart::text(format!("</{tag}>")),
        ];
        ToolReturnValue::ok(
            output,
            format!(
                "Loaded {tag} file `{shown}` ({mime}, {size} bytes{size_hint}). If you need to output coordinates, output relative coordinates first and compute absolute coordinates using the original image size; if you generate or edit images/videos via commands or scripts, read the result back immediately before continuing."
            ),
        )
    }
}

/// HTML attribute escaping as Python's `html.escape(quote=True)`.
fn escape_attr(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c => out.push(c),
        }
    }
    out
}

/// Standard base64 with padding.
fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let sextets = [(n >> 18) & 63, (n >> 12) & 63, (n >> 6) & 63, n & 63];
        for (i, s) in sextets.iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[*s as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Width and height of PNG, GIF, BMP, JPEG and WebP images, read from their headers.
fn image_size(data: &[u8]) -> Option<(u32, u32)> {
    let be16 = |i: usize| Some(u32::from(u16::from_be_bytes([*data.get(i)?, *data.get(i + 1)?])));
    let le16 = |i: usize| Some(u32::from(u16::from_le_bytes([*data.get(i)?, *data.get(i + 1)?])));
    let be32 = |i: usize| Some(u32::from_be_bytes(data.get(i..i + 4)?.try_into().ok()?));
    let le32 = |i: usize| Some(i32::from_le_bytes(data.get(i..i + 4)?.try_into().ok()?));
    let le24 = |i: usize| {
        Some(u32::from_le_bytes([
            *data.get(i)?,
            *data.get(i + 1)?,
            *data.get(i + 2)?,
            0,
        ]))
    };
    if data.starts_with(b"\x89PNG\r\n\x1a\n") && data.get(12..16) == Some(b"IHDR") {
        return Some((be32(16)?, be32(20)?));
    }
    if data.starts_with(b"GIF87a") || data.starts_with(b"GIF89a") {
        return Some((le16(6)?, le16(8)?));
    }
    if data.starts_with(b"BM") {
        return Some((le32(18)?.unsigned_abs(), le32(22)?.unsigned_abs()));
    }
    if data.starts_with(b"RIFF") && data.get(8..12) == Some(b"WEBP") {
        return match data.get(12..16)? {
            b"VP8 " => Some((le16(26)? & 0x3fff, le16(28)? & 0x3fff)),
            b"VP8L" => {
                let bits = u32::from_le_bytes(data.get(21..25)?.try_into().ok()?);
                Some(((bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1))
            }
            b"VP8X" => Some((le24(24)? + 1, le24(27)? + 1)),
            _ => None,
        };
    }
    if data.starts_with(b"\xff\xd8") {
        let mut i = 2;
        while i + 9 < data.len() {
            if data[i] != 0xff {
                return None;
            }
            let marker = data[i + 1];
            if marker == 0xff {
                i += 1;
                continue;
            }
            let is_sof = (0xc0..=0xcf).contains(&marker) && !matches!(marker, 0xc4 | 0xc8 | 0xcc);
            if is_sof {
                return Some((be16(i + 7)?, be16(i + 5)?));
            }
            i += 2 + usize::try_from(be16(i + 2)?).ok()?;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::test_support::{TestDir, call};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn media_tool(dir: &TestDir, caps: &[&str]) -> Option<ReadMediaFile> {
        ReadMediaFile::new(dir.env(), FileSettings::default(), caps)
    }

    /// A 2x3 PNG header (enough for detection and the size; the pixels are not needed).
    fn png() -> Vec<u8> {
        let mut data = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
        data.extend_from_slice(&2u32.to_be_bytes());
        data.extend_from_slice(&3u32.to_be_bytes());
        data.extend_from_slice(b"\x08\x02\x00\x00\x00");
        data
    }

    #[test]
    fn only_offered_to_models_with_media_input() {
        let dir = TestDir::new();
        assert!(media_tool(&dir, &[]).is_none());
        assert!(media_tool(&dir, &["thinking"]).is_none());
        let tool = media_tool(&dir, &["image_in"]).unwrap();
        assert!(tool.spec().description.contains("videos are not supported"));
    }

    #[tokio::test]
    async fn loads_an_image_as_a_data_url() {
        let dir = TestDir::new();
        dir.write_bytes("pic.png", &png());
        let tool = Arc::new(media_tool(&dir, &["image_in"]).unwrap());
        let (_, value) = call(tool, json!({"path": "pic.png"})).await;
        let shown = dir.show("pic.png");
        let expected = ToolReturnValue::ok(
            vec![
                ContentPart::text(format!("<image path=\"{shown}\">")),
                ContentPart::ImageUrl(ImageUrlPart {
                    image_url: MediaUrl::new(format!("data:image/png;base64,{}", base64(&png()))),
                }),
                ContentPart::text("</image>"),
            ],
            format!(
                "Loaded image file `{shown}` (image/png, 29 bytes, original size 2x3px). If you need to output coordinates, output relative coordinates first and compute absolute coordinates using the original image size; if you generate or edit images/videos via commands or scripts, read the result back immediately before continuing."
            ),
        );
        assert_eq!(value, expected);
    }

    #[tokio::test]
    async fn refusals() {
        let dir = TestDir::new();
        dir.write("notes.txt", "hi");
        dir.write("blob.dat", "\0\0");
        dir.write_bytes("clip.mp4", b"\x00\x00\x00\x18ftypmp42");
        dir.write_bytes("empty.png", b"");
        let tool = Arc::new(media_tool(&dir, &["image_in"]).unwrap());
        let empty = dir.show("empty.png");
        for (path, message, brief) in [
            ("", "File path cannot be empty.".to_owned(), "Empty file path"),
            ("nope.png", "`nope.png` does not exist.".to_owned(), "File not found"),
            ("notes.txt", "`notes.txt` is a text file. Use ReadFile to read text files.".to_owned(), "Unsupported file type"),
            (
                "blob.dat",
                "`blob.dat` seems not readable as an image or video file. You may need to read it with proper shell commands, Python tools or MCP tools if available. If you read/operate it with Python, you MUST ensure that any third-party packages are installed in a virtual environment (venv).".to_owned(),
                "File not readable",
            ),
            (
                "clip.mp4",
                "The current model does not support video input. Tell the user to use a model with video input capability.".to_owned(),
                "Unsupported media type",
            ),
            ("empty.png", format!("`{empty}` is empty."), "Empty file"),
        ] {
            let (_, value) = call(Arc::clone(&tool), json!({ "path": path })).await;
            assert_eq!(value, ToolReturnValue::error("", message, brief), "{path}");
        }
    }

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar\xff"), "Zm9vYmFy/w==");
    }

    #[test]
    fn image_sizes_from_headers() {
        assert_eq!(image_size(&png()), Some((2, 3)));
        assert_eq!(image_size(b"GIF89a\x05\x00\x07\x00"), Some((5, 7)));
        let jpeg = b"\xff\xd8\xff\xe0\x00\x04ab\xff\xc0\x00\x11\x08\x00\x09\x00\x0a\x03\x01\x22\x00";
        assert_eq!(image_size(jpeg), Some((10, 9)));
        assert_eq!(image_size(b"nothing"), None);
        assert_eq!(escape_attr("a\"b'<&>"), "a&quot;b&#x27;&lt;&amp;&gt;");
    }
}
