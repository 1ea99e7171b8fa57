//! An MCP `tools/call` result as a tool return value (reference `convert_mcp_tool_result`).
//!
//! Text and inline media share one budget of [`MAX_OUTPUT_CHARS`] characters: text is cut at the budget,
//! a media part (counted by the length of its data URL) that does not fit is dropped, and any loss adds
//! the reference's truncation note at the end. Unsupported parts become a placeholder text instead of
//! failing the call.
//!
//! Deviation: an embedded *text* resource becomes its text (the reference reports it as unsupported).

use kimi_wire::message::{AudioUrlPart, ContentPart, ImageUrlPart, MediaUrl, ToolReturnValue, VideoUrlPart};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// The characters of one MCP result the model may receive (reference `MCP_MAX_OUTPUT_CHARS`).
pub const MAX_OUTPUT_CHARS: usize = 100_000;

/// The message of an MCP result flagged `isError` (reference text).
pub const ERROR_RESULT_MESSAGE: &str =
    "Tool returned an error. The output may be error message or incomplete output";

/// Converts `result` within the budget.
pub fn convert_result(result: CallToolResult) -> ToolReturnValue {
    let mut content = Vec::new();
    let mut budget = MAX_OUTPUT_CHARS;
    let mut truncated = false;
    for block in result.content {
        let part = convert_block(block).unwrap_or_else(|reason| {
            tracing::warn!(%reason, "skipping unsupported MCP content part");
            ContentPart::text(format!("[Unsupported content: {reason}]"))
        });
        match part {
            ContentPart::Text(mut text) => {
                if budget == 0 {
                    truncated = true;
                    continue;
                }
                let len = text.text.chars().count();
                if len > budget {
                    text.text = text.text.chars().take(budget).collect();
                    truncated = true;
                }
                budget -= len.min(budget);
                content.push(ContentPart::Text(text));
            }
            part => match media_len(&part) {
                Some(size) if size > budget => truncated = true,
                Some(size) => {
                    budget -= size;
                    content.push(part);
                }
                None => content.push(part),
            },
        }
    }
    if truncated {
        content.push(ContentPart::text(format!(
            "\n\n[Output truncated: exceeded {MAX_OUTPUT_CHARS} character limit. Use pagination or more specific queries to get remaining content.]"
        )));
    }
    if result.is_error == Some(true) {
        ToolReturnValue::error(content, ERROR_RESULT_MESSAGE, "")
    } else {
        ToolReturnValue::ok(content, "")
    }
}

/// One MCP content block as a content part (reference `convert_mcp_content`); `Err` carries why it is
/// unsupported.
fn convert_block(block: ContentBlock) -> Result<ContentPart, String> {
    match block {
        ContentBlock::Text(text) => Ok(ContentPart::text(text.text)),
        ContentBlock::Image(image) => Ok(image_part(data_url(&image.mime_type, &image.data))),
        ContentBlock::Audio(audio) => Ok(audio_part(data_url(&audio.mime_type, &audio.data))),
        ContentBlock::Resource(embedded) => match embedded.resource {
            ResourceContents::BlobResourceContents { mime_type, blob, .. } => {
                let mime = mime_type.unwrap_or_else(|| "application/octet-stream".to_owned());
                media_by_mime(&mime, data_url(&mime, &blob))
            }
            ResourceContents::TextResourceContents { text, .. } => Ok(ContentPart::text(text)),
            other => Err(format!("Unsupported MCP tool result part: {other:?}")),
        },
        ContentBlock::ResourceLink(link) => {
            let mime = link
                .mime_type
                .unwrap_or_else(|| "application/octet-stream".to_owned());
            media_by_mime(&mime, link.uri)
        }
        other => Err(format!("Unsupported MCP tool result part: {other:?}")),
    }
}

fn media_by_mime(mime: &str, url: String) -> Result<ContentPart, String> {
    if mime.starts_with("image/") {
        Ok(image_part(url))
    } else if mime.starts_with("audio/") {
        Ok(audio_part(url))
    } else if mime.starts_with("video/") {
        Ok(ContentPart::VideoUrl(VideoUrlPart {
            video_url: MediaUrl::new(url),
        }))
    } else {
        Err(format!("Unsupported mime type: {mime}"))
    }
}

fn image_part(url: String) -> ContentPart {
    ContentPart::ImageUrl(ImageUrlPart {
        image_url: MediaUrl::new(url),
    })
}

fn audio_part(url: String) -> ContentPart {
    ContentPart::AudioUrl(AudioUrlPart {
        audio_url: MediaUrl::new(url),
    })
}

fn data_url(mime: &str, base64: &str) -> String {
    format!("data:{mime};base64,{base64}")
}

fn media_len(part: &ContentPart) -> Option<usize> {
    match part {
        ContentPart::ImageUrl(p) => Some(p.image_url.url.chars().count()),
        ContentPart::AudioUrl(p) => Some(p.audio_url.url.chars().count()),
        ContentPart::VideoUrl(p) => Some(p.video_url.url.chars().count()),
        ContentPart::Text(_) | ContentPart::Think(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kimi_wire::message::ToolOutput;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn result(value: serde_json::Value) -> CallToolResult {
        serde_json::from_value(value).unwrap()
    }

    fn parts(value: &ToolReturnValue) -> Vec<ContentPart> {
        match &value.output {
            ToolOutput::Parts(parts) => parts.clone(),
            ToolOutput::Text(text) => vec![ContentPart::text(text.clone())],
        }
    }

    #[test]
    fn text_image_audio_and_resources_convert() {
        let value = convert_result(result(json!({"content": [
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "AAA", "mimeType": "image/png"},
            {"type": "audio", "data": "BBB", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "f://x", "mimeType": "video/mp4", "blob": "CCC"}},
            {"type": "resource", "resource": {"uri": "f://t", "text": "inline text"}},
            {"type": "resource_link", "uri": "https://i/x.png", "name": "x", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "https://i/x.bin", "name": "x"},
        ]})));
        assert!(!value.is_error);
        assert_eq!(value.message, "");
        assert_eq!(
            serde_json::to_value(parts(&value)).unwrap(),
            json!([
                {"type": "text", "text": "hi"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA", "id": null}},
                {"type": "audio_url", "audio_url": {"url": "data:audio/wav;base64,BBB", "id": null}},
                {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,CCC", "id": null}},
                {"type": "text", "text": "inline text"},
                {"type": "image_url", "image_url": {"url": "https://i/x.png", "id": null}},
                {"type": "text", "text": "[Unsupported content: Unsupported mime type: application/octet-stream]"},
            ])
        );
    }

    #[test]
    fn error_results_are_tool_errors_with_the_reference_message() {
        let value = convert_result(result(
            json!({"content": [{"type": "text", "text": "bad"}], "isError": true}),
        ));
        assert!(value.is_error);
        assert_eq!(value.message, ERROR_RESULT_MESSAGE);
        assert_eq!(value.display, vec![]);
        assert_eq!(parts(&value), vec![ContentPart::text("bad")]);
    }

    #[test]
    fn the_budget_is_shared_across_parts() {
        let big = "x".repeat(60_000);
        let image = "A".repeat(50_000);
        let value = convert_result(result(json!({"content": [
            {"type": "text", "text": big},
            {"type": "image", "data": image, "mimeType": "image/png"},
            {"type": "text", "text": big},
            {"type": "text", "text": "dropped"},
        ]})));
        let got = parts(&value);
        let note = format!(
            "\n\n[Output truncated: exceeded {MAX_OUTPUT_CHARS} character limit. Use pagination or more specific queries to get remaining content.]"
        );
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].as_text().map(str::len), Some(60_000));
        assert_eq!(got[1].as_text().map(str::len), Some(40_000));
        assert_eq!(got[2].as_text(), Some(note.as_str()));
    }

    #[test]
    fn nothing_lost_no_note() {
        let value = convert_result(result(json!({"content": []})));
        assert_eq!(parts(&value), vec![]);
    }
}
