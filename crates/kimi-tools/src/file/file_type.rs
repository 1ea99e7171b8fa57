//! Deciding whether a file is text, an image, a video, or something we should not read as text.
//!
//! Follows the reference (`kimi_cli/tools/file/utils.py`): the suffix gives a hint (its own tables,
//! then Python's built-in MIME table for `image/*` and `video/*`); an image or video suffix wins;
//! otherwise the first [`MEDIA_SNIFF_BYTES`] bytes are sniffed for media magic numbers, and a NUL byte
//! marks the file as binary; known binary suffixes (archives, office files, fonts...) are refused.

use std::path::Path;

/// How many leading bytes are inspected.
pub(crate) const MEDIA_SNIFF_BYTES: usize = 512;

/// What a file holds, as far as the file tools care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileKind {
    /// Readable as text.
    Text,
    /// An image with this MIME type.
    Image(&'static str),
    /// A video with this MIME type.
    Video(&'static str),
    /// Binary or unrecognised; not for ReadFile.
    Unknown,
}

impl FileKind {
    /// `image` / `video` / `text` / `unknown`, as the reference names the kinds in its messages.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Image(_) => "image",
            Self::Video(_) => "video",
            Self::Unknown => "unknown",
        }
    }
}

/// Image suffixes and their MIME types (the reference's own table first, then Python's defaults).
const IMAGE_SUFFIXES: &[(&str, &str)] = &[
    (".png", "image/png"),
    (".jpg", "image/jpeg"),
    (".jpeg", "image/jpeg"),
    (".gif", "image/gif"),
    (".bmp", "image/bmp"),
    (".tif", "image/tiff"),
    (".tiff", "image/tiff"),
    (".webp", "image/webp"),
    (".ico", "image/x-icon"),
    (".heic", "image/heic"),
    (".heif", "image/heif"),
    (".avif", "image/avif"),
    (".svgz", "image/svg+xml"),
    // Python's `mimetypes` defaults.
    (".ief", "image/ief"),
    (".jpe", "image/jpeg"),
    (".pbm", "image/x-portable-bitmap"),
    (".pgm", "image/x-portable-graymap"),
    (".pnm", "image/x-portable-anymap"),
    (".ppm", "image/x-portable-pixmap"),
    (".ras", "image/x-cmu-raster"),
    (".rgb", "image/x-rgb"),
    (".xbm", "image/x-xbitmap"),
    (".xpm", "image/x-xpixmap"),
    (".xwd", "image/x-xwindowdump"),
];

/// Video suffixes and their MIME types (the reference's own table first, then Python's defaults).
const VIDEO_SUFFIXES: &[(&str, &str)] = &[
    (".mp4", "video/mp4"),
    (".mkv", "video/x-matroska"),
    (".avi", "video/x-msvideo"),
    (".mov", "video/quicktime"),
    (".wmv", "video/x-ms-wmv"),
    (".webm", "video/webm"),
    (".m4v", "video/x-m4v"),
    (".flv", "video/x-flv"),
    (".3gp", "video/3gpp"),
    (".3g2", "video/3gpp2"),
    // Python's `mimetypes` defaults.
    (".m1v", "video/mpeg"),
    (".mpa", "video/mpeg"),
    (".mpe", "video/mpeg"),
    (".mpeg", "video/mpeg"),
    (".mpg", "video/mpeg"),
    (".movie", "video/x-sgi-movie"),
    (".qt", "video/quicktime"),
];

/// Suffixes that are never text, even without a NUL byte in the first bytes.
const NON_TEXT_SUFFIXES: &[&str] = &[
    ".icns", ".psd", ".ai", ".eps", ".pdf", ".doc", ".docx", ".dot", ".dotx", ".rtf", ".odt", ".xls",
    ".xlsx", ".xlsm", ".xlt", ".xltx", ".xltm", ".ods", ".ppt", ".pptx", ".pptm", ".pps", ".ppsx", ".odp",
    ".pages", ".numbers", ".key", ".zip", ".rar", ".7z", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".lz",
    ".lz4", ".br", ".cab", ".ar", ".deb", ".rpm", ".mp3", ".wav", ".flac", ".ogg", ".oga", ".opus", ".aac",
    ".m4a", ".wma", ".ttf", ".otf", ".woff", ".woff2", ".exe", ".dll", ".so", ".dylib", ".bin", ".apk",
    ".ipa", ".jar", ".class", ".pyc", ".pyo", ".wasm", ".dmg", ".iso", ".img", ".sqlite", ".sqlite3", ".db",
    ".db3",
];

/// The ASF (Windows Media) header GUID.
const ASF_HEADER: &[u8] = b"\x30\x26\xb2\x75\x8e\x66\xcf\x11\xa6\xd9\x00\xaa\x00\x62\xce\x6c";

/// ISO-BMFF (`ftyp`) brands that mean an image.
const FTYP_IMAGE_BRANDS: &[(&str, &str)] = &[
    ("avif", "image/avif"),
    ("avis", "image/avif"),
    ("heic", "image/heic"),
    ("heif", "image/heif"),
    ("heix", "image/heif"),
    ("hevc", "image/heic"),
    ("mif1", "image/heif"),
    ("msf1", "image/heif"),
];

/// ISO-BMFF (`ftyp`) brands that mean a video.
const FTYP_VIDEO_BRANDS: &[(&str, &str)] = &[
    ("isom", "video/mp4"),
    ("iso2", "video/mp4"),
    ("iso5", "video/mp4"),
    ("mp41", "video/mp4"),
    ("mp42", "video/mp4"),
    ("avc1", "video/mp4"),
    ("mp4v", "video/mp4"),
    ("m4v", "video/x-m4v"),
    ("qt", "video/quicktime"),
    ("3gp4", "video/3gpp"),
    ("3gp5", "video/3gpp"),
    ("3gp6", "video/3gpp"),
    ("3gp7", "video/3gpp"),
    ("3g2", "video/3gpp2"),
];

/// The suffix as Python's `PurePath.suffix` gives it (from the last dot of the name, unless the name
/// starts with it or ends with it), lower-cased.
fn suffix(path: &Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    match name.rfind('.') {
        Some(i) if i > 0 && i + 1 < name.len() => name[i..].to_lowercase(),
        _ => String::new(),
    }
}

fn lookup(table: &[(&str, &'static str)], key: &str) -> Option<&'static str> {
    table.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// Recognises image and video files by their first bytes.
pub(crate) fn sniff_media(header: &[u8]) -> Option<FileKind> {
    let header = &header[..header.len().min(MEDIA_SNIFF_BYTES)];
    let starts = |magic: &[u8]| header.starts_with(magic);
    if starts(b"\x89PNG\r\n\x1a\n") {
        return Some(FileKind::Image("image/png"));
    }
    if starts(b"\xff\xd8\xff") {
        return Some(FileKind::Image("image/jpeg"));
    }
    if starts(b"GIF87a") || starts(b"GIF89a") {
        return Some(FileKind::Image("image/gif"));
    }
    if starts(b"BM") {
        return Some(FileKind::Image("image/bmp"));
    }
    if starts(b"II*\x00") || starts(b"MM\x00*") {
        return Some(FileKind::Image("image/tiff"));
    }
    if starts(b"\x00\x00\x01\x00") {
        return Some(FileKind::Image("image/x-icon"));
    }
    if starts(b"RIFF") && header.len() >= 12 {
        match &header[8..12] {
            b"WEBP" => return Some(FileKind::Image("image/webp")),
            b"AVI " => return Some(FileKind::Video("video/x-msvideo")),
            _ => {}
        }
    }
    if starts(b"FLV") {
        return Some(FileKind::Video("video/x-flv"));
    }
    if starts(ASF_HEADER) {
        return Some(FileKind::Video("video/x-ms-wmv"));
    }
    if starts(b"\x1a\x45\xdf\xa3") {
        let lowered = header.to_ascii_lowercase();
        if contains(&lowered, b"webm") {
            return Some(FileKind::Video("video/webm"));
        }
        if contains(&lowered, b"matroska") {
            return Some(FileKind::Video("video/x-matroska"));
        }
    }
    if header.len() >= 12 && &header[4..8] == b"ftyp" {
        let brand: String = header[8..12]
            .iter()
            .filter(|b| b.is_ascii())
            .map(|&b| b as char)
            .collect();
        let brand = brand.to_lowercase();
        let brand = brand.trim();
        if let Some(mime) = lookup(FTYP_IMAGE_BRANDS, brand) {
            return Some(FileKind::Image(mime));
        }
        if let Some(mime) = lookup(FTYP_VIDEO_BRANDS, brand) {
            return Some(FileKind::Video(mime));
        }
    }
    None
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Classifies `path` from its name and, when given, its first bytes.
pub(crate) fn detect_file_type(path: &Path, header: Option<&[u8]>) -> FileKind {
    let suffix = suffix(path);
    // `.svg` is text to the reference (it can be read and edited as XML).
    let hint = if suffix == ".svg" {
        Some(FileKind::Text)
    } else if let Some(mime) = lookup(IMAGE_SUFFIXES, &suffix) {
        Some(FileKind::Image(mime))
    } else {
        lookup(VIDEO_SUFFIXES, &suffix).map(FileKind::Video)
    };
    if let Some(kind @ (FileKind::Image(_) | FileKind::Video(_))) = &hint {
        return kind.clone();
    }
    if let Some(header) = header {
        if let Some(sniffed) = sniff_media(header) {
            // A media signature under a text suffix (`.svg`) is suspicious: refuse it.
            if hint.is_some() {
                return FileKind::Unknown;
            }
            return sniffed;
        }
        if header[..header.len().min(MEDIA_SNIFF_BYTES)].contains(&0) {
            return FileKind::Unknown;
        }
    }
    if let Some(hint) = hint {
        return hint;
    }
    if NON_TEXT_SUFFIXES.contains(&suffix.as_str()) {
        return FileKind::Unknown;
    }
    FileKind::Text
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn suffix_wins_for_media() {
        assert_eq!(
            detect_file_type(Path::new("a.PNG"), Some(b"plain")),
            FileKind::Image("image/png")
        );
        assert_eq!(
            detect_file_type(Path::new("clip.mkv"), None),
            FileKind::Video("video/x-matroska")
        );
        assert_eq!(
            detect_file_type(Path::new("x.jpe"), None),
            FileKind::Image("image/jpeg")
        );
    }

    #[test]
    fn magic_numbers_and_nul_bytes() {
        assert_eq!(
            detect_file_type(Path::new("noext"), Some(b"\x89PNG\r\n\x1a\nrest")),
            FileKind::Image("image/png")
        );
        assert_eq!(
            detect_file_type(Path::new("v"), Some(b"\x00\x00\x00\x18ftypmp42")),
            FileKind::Video("video/mp4")
        );
        assert_eq!(
            detect_file_type(Path::new("a.bin.txt"), Some(b"ab\x00cd")),
            FileKind::Unknown
        );
        assert_eq!(
            detect_file_type(Path::new("a.svg"), Some(b"GIF89a")),
            FileKind::Unknown
        );
        assert_eq!(
            detect_file_type(Path::new("a.svg"), Some(b"<svg/>")),
            FileKind::Text
        );
    }

    #[test]
    fn binary_suffixes_and_plain_text() {
        assert_eq!(
            detect_file_type(Path::new("a.pdf"), Some(b"%PDF-1.4")),
            FileKind::Unknown
        );
        assert_eq!(
            detect_file_type(Path::new("main.rs"), Some(b"fn main() {}")),
            FileKind::Text
        );
        assert_eq!(
            detect_file_type(Path::new("x.ts"), Some(b"let a = 1;")),
            FileKind::Text
        );
        assert_eq!(
            detect_file_type(Path::new(".bashrc"), Some(b"export A=1")),
            FileKind::Text
        );
    }
}
