//! Converting tool results and reminders into model messages (reference `soul/message.py`).

use kimi_llm::Message;
use kimi_wire::message::{ContentPart, ToolOutput, ToolReturnValue};

/// `<system>{text}</system>` as a text part.
pub fn system(text: &str) -> ContentPart {
    ContentPart::text(format!("<system>{text}</system>"))
}

/// The tool message the model sees for a call's result.
pub fn tool_result_message(tool_call_id: &str, value: &ToolReturnValue) -> Message {
    let mut content = Vec::new();
    if value.is_error {
        content.push(system(&format!("ERROR: {}", value.message)));
        content.extend(output_parts(&value.output));
    } else {
        if !value.message.is_empty() {
            content.push(system(&value.message));
        }
        content.extend(output_parts(&value.output));
        if content.is_empty() {
            content.push(system("Tool output is empty."));
        } else if !content.iter().any(|p| matches!(p, ContentPart::Text(_))) {
            content.insert(0, system("Tool returned non-text content."));
        }
    }
    Message::tool(tool_call_id, content)
}

fn output_parts(output: &ToolOutput) -> Vec<ContentPart> {
    match output {
        ToolOutput::Text(text) if text.is_empty() => Vec::new(),
        ToolOutput::Text(text) => vec![ContentPart::text(text.clone())],
        ToolOutput::Parts(parts) => parts.clone(),
    }
}
