//! `AskUserQuestion`: puts multiple-choice questions to the user through a `QuestionRequest` and returns
//! the answers (reference `kimi_cli/tools/ask_user`).
//!
//! The outcomes, all with the reference's exact texts:
//! - afk mode: nobody is there to answer, so the questions are dismissed at once;
//! - a client that did not declare `supports_question`: a tool error telling the model to ask in plain
//!   text instead (the session should also hide the tool from such clients);
//! - answers: `{"answers": {question: label, ...}}`, spaced as Python's `json.dumps` writes it;
//! - no answer (dismissed, a JSON-RPC error, a malformed answer, the turn or connection ending): empty
//!   answers with a note that the user dismissed the questions.

use std::sync::Arc;

use futures::future::BoxFuture;
use kimi_core::ApprovalRuntime;
use kimi_core::ClientFlags;
use kimi_core::EventSink;
use kimi_core::{CallContext, Plan, Tool, parse_args};
use kimi_llm::{Dumps, ToolSpec, dumps};
use kimi_wire::message::{QuestionItem, QuestionOption, ToolReturnValue};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::args;
use crate::question::{self, Reply};

/// The tool's name.
pub const NAME: &str = "AskUserQuestion";

/// The tool error for clients that cannot answer questions (reference text).
pub const UNSUPPORTED_MESSAGE: &str = "The connected client does not support interactive questions. \
     Do NOT call this tool again. Ask the user directly in your text response instead.";

const AFK_OUTPUT: &str =
    r#"{"answers": {}, "note": "Running in afk mode. No user is present. Make your own decision."}"#;
const DISMISSED_OUTPUT: &str = r#"{"answers": {}, "note": "User dismissed the question without answering."}"#;
const DISMISSED_MESSAGE: &str = "User dismissed the question without answering.";

// Parameters of `AskUserQuestion` (plain comments on the types: doc comments would become schema
// descriptions).
#[derive(Debug, Deserialize, JsonSchema)]
struct AskArgs {
    /// One to four questions to ask together.
    #[schemars(length(min = 1, max = 4))]
    questions: Vec<QuestionArg>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct QuestionArg {
    /// The question itself, specific and ending with a question mark.
    question: String,
    /// A short tag for the question, at most about 12 characters (e.g. "Database", "Naming").
    #[serde(default)]
    header: String,
    /// Two to four distinct choices. Leave out any "Other" choice: free-form answers are always possible.
    #[schemars(length(min = 2, max = 4))]
    options: Vec<OptionArg>,
    /// Whether the user may pick more than one option.
    #[serde(default)]
    multi_select: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct OptionArg {
    /// The choice in a few words; append "(Recommended)" to the one you suggest.
    label: String,
    /// What picking this choice implies, including its trade-offs.
    #[serde(default)]
    description: String,
}

/// The tool's spec (the kimi-code profile adapts its parameters).
pub(crate) fn spec() -> ToolSpec {
    crate::tool_spec::<AskArgs>(NAME, include_str!("descriptions/ask_user.md"))
}

/// The `AskUserQuestion` tool.
#[derive(Debug)]
pub struct AskUserQuestion {
    spec: ToolSpec,
    approvals: Arc<ApprovalRuntime>,
    client: Arc<ClientFlags>,
    events: EventSink,
}

impl AskUserQuestion {
    /// A tool that reads afk from `approvals`, the client's capability from `client`, and sends its
    /// requests through `events`.
    pub fn new(approvals: Arc<ApprovalRuntime>, client: Arc<ClientFlags>, events: EventSink) -> Self {
        Self {
            spec: spec(),
            approvals,
            client,
            events,
        }
    }

    fn make_plan(self: Arc<Self>, args: Value, ctx: CallContext) -> Result<Plan, ToolReturnValue> {
        let args: AskArgs = parse_args(args)?;
        args::check_len("questions", args.questions.len(), 1, 4)?;
        for (i, question) in args.questions.iter().enumerate() {
            args::check_len(&format!("questions.{i}.options"), question.options.len(), 2, 4)?;
        }
        let questions = args
            .questions
            .into_iter()
            .map(|q| QuestionItem {
                question: q.question,
                header: q.header,
                options: q
                    .options
                    .into_iter()
                    .map(|o| QuestionOption {
                        label: o.label,
                        description: o.description,
                    })
                    .collect(),
                multi_select: q.multi_select,
                body: String::new(),
                other_label: String::new(),
                other_description: String::new(),
            })
            .collect();
        Ok(Plan::interactive(Box::pin(async move {
            self.ask(questions, ctx.tool_call_id, ctx.cancel).await
        })))
    }

    async fn ask(
        &self,
        questions: Vec<QuestionItem>,
        tool_call_id: String,
        cancel: CancellationToken,
    ) -> ToolReturnValue {
        if self.approvals.state().afk {
            return ToolReturnValue::ok_with_brief(
                AFK_OUTPUT,
                "Afk mode, auto-dismissed.",
                "Auto-dismissed (afk)",
            );
        }
        if !self.client.supports_question() {
            return ToolReturnValue::error("", UNSUPPORTED_MESSAGE, "Client unsupported");
        }
        let answers = match question::ask(&self.events, tool_call_id, questions, &cancel).await {
            Reply::Answered(answers) => answers,
            Reply::Dismissed => return dismissed(),
            Reply::Failed => {
                return ToolReturnValue::error("", "Failed to get user response.", "Question failed");
            }
        };
        // Reference: `json.dumps({"answers": ...}, ensure_ascii=False)`.
        let output = dumps(&serde_json::json!({ "answers": answers }), Dumps::UNICODE);
        ToolReturnValue::ok_with_brief(output, "User has answered.", "User answered")
    }
}

impl Tool for AskUserQuestion {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move { self.make_plan(args, ctx) })
    }
}

fn dismissed() -> ToolReturnValue {
    ToolReturnValue::ok_with_brief(DISMISSED_OUTPUT, DISMISSED_MESSAGE, "User dismissed")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kimi_core::ApprovalState;
    use kimi_core::Effect;
    use kimi_wire::testing::FakeClient;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    struct Setup {
        client: FakeClient,
        flags: Arc<ClientFlags>,
        approvals: Arc<ApprovalRuntime>,
        tool: Arc<AskUserQuestion>,
    }

    fn setup() -> Setup {
        let client = FakeClient::start();
        let flags = Arc::new(ClientFlags::default());
        flags.set(true, false);
        let approvals = Arc::new(ApprovalRuntime::new(
            client.handle.clone(),
            ApprovalState::default(),
        ));
        let events = EventSink::new(client.handle.clone(), None);
        let tool = Arc::new(AskUserQuestion::new(
            Arc::clone(&approvals),
            Arc::clone(&flags),
            events,
        ));
        Setup {
            client,
            flags,
            approvals,
            tool,
        }
    }

    fn question(text: &str) -> Value {
        json!({
            "question": text,
            "header": "Test",
            "options": [{"label": "Alpha", "description": "First"}, {"label": "Beta"}],
        })
    }

    fn ctx(cancel: &CancellationToken) -> CallContext {
        CallContext::new("tc-q1", None, cancel.clone())
    }

    async fn plan(
        tool: &Arc<AskUserQuestion>,
        args: Value,
        cancel: &CancellationToken,
    ) -> Result<Plan, ToolReturnValue> {
        Arc::clone(tool).plan(args, ctx(cancel)).await
    }

    async fn call(tool: &Arc<AskUserQuestion>, args: Value) -> ToolReturnValue {
        match plan(tool, args, &CancellationToken::new()).await {
            Ok(plan) => plan.run.await,
            Err(value) => value,
        }
    }

    /// Starts the call, waits for its `QuestionRequest`, and returns the request and the running call.
    async fn asked(
        setup: &mut Setup,
        args: Value,
        cancel: &CancellationToken,
    ) -> (Value, tokio::task::JoinHandle<ToolReturnValue>) {
        let plan = plan(&setup.tool, args, cancel).await.unwrap();
        assert_eq!(plan.effect, Effect::ReadOnly);
        assert_eq!(plan.access, kimi_core::Access::Interact);
        let running = tokio::spawn(plan.run);
        let message = setup.client.next_message().await;
        (message, running)
    }

    #[tokio::test]
    async fn answers_come_back_as_python_style_json() {
        let mut setup = setup();
        let args = json!({"questions": [question("Which option?"), question("And which colour?")]});
        let (message, running) = asked(&mut setup, args, &CancellationToken::new()).await;
        assert_eq!(message["method"], "request");
        assert_eq!(message["params"]["type"], "QuestionRequest");
        let payload = &message["params"]["payload"];
        assert_eq!(message["id"], payload["id"]);
        assert_eq!(
            payload,
            &json!({
                "id": payload["id"],
                "tool_call_id": "tc-q1",
                "questions": [
                    {
                        "question": "Which option?", "header": "Test",
                        "options": [{"label": "Alpha", "description": "First"}, {"label": "Beta", "description": ""}],
                        "multi_select": false, "body": "", "other_label": "", "other_description": ""
                    },
                    {
                        "question": "And which colour?", "header": "Test",
                        "options": [{"label": "Alpha", "description": "First"}, {"label": "Beta", "description": ""}],
                        "multi_select": false, "body": "", "other_label": "", "other_description": ""
                    }
                ]
            })
        );
        let answers = json!({"request_id": payload["id"], "answers": {"Which option?": "Alpha", "And which colour?": "Alpha, Beta"}});
        setup.client.respond(&message["id"], answers).await;
        let value = running.await.unwrap();
        assert_eq!(
            value,
            ToolReturnValue::ok_with_brief(
                r#"{"answers": {"Which option?": "Alpha", "And which colour?": "Alpha, Beta"}}"#,
                "User has answered.",
                "User answered"
            )
        );
    }

    #[tokio::test]
    async fn an_error_or_empty_answer_counts_as_dismissed() {
        let expected = ToolReturnValue::ok_with_brief(
            r#"{"answers": {}, "note": "User dismissed the question without answering."}"#,
            "User dismissed the question without answering.",
            "User dismissed",
        );
        let mut setup = setup();
        let args = json!({"questions": [question("Which option?")]});

        let (message, running) = asked(&mut setup, args.clone(), &CancellationToken::new()).await;
        setup
            .client
            .respond_error(&message["id"], -32000, "User cancelled")
            .await;
        assert_eq!(running.await.unwrap(), expected);

        let (message, running) = asked(&mut setup, args.clone(), &CancellationToken::new()).await;
        let id = message["params"]["payload"]["id"].clone();
        setup
            .client
            .respond(&message["id"], json!({"request_id": id, "answers": {}}))
            .await;
        assert_eq!(running.await.unwrap(), expected);

        let (message, running) = asked(&mut setup, args.clone(), &CancellationToken::new()).await;
        setup
            .client
            .respond(&message["id"], json!({"nonsense": true}))
            .await;
        assert_eq!(running.await.unwrap(), expected);

        let cancel = CancellationToken::new();
        let (_message, running) = asked(&mut setup, args, &cancel).await;
        cancel.cancel();
        assert_eq!(running.await.unwrap(), expected);
    }

    #[tokio::test]
    async fn afk_dismisses_without_asking() {
        let setup = setup();
        setup.approvals.set_afk(true);
        let value = call(&setup.tool, json!({"questions": [question("Which option?")]})).await;
        assert_eq!(
            value,
            ToolReturnValue::ok_with_brief(
                r#"{"answers": {}, "note": "Running in afk mode. No user is present. Make your own decision."}"#,
                "Afk mode, auto-dismissed.",
                "Auto-dismissed (afk)"
            )
        );
    }

    #[tokio::test]
    async fn clients_without_question_support_get_a_tool_error() {
        let setup = setup();
        setup.flags.set(false, false);
        let value = call(&setup.tool, json!({"questions": [question("Which option?")]})).await;
        assert_eq!(
            value,
            ToolReturnValue::error(
                "",
                "The connected client does not support interactive questions. Do NOT call this tool again. Ask the user directly in your text response instead.",
                "Client unsupported"
            )
        );
    }

    #[tokio::test]
    async fn argument_limits() {
        let setup = setup();
        let prefix = "Error validating JSON arguments: 1 validation error for Params\n";
        let one_option = json!({"question": "Q?", "options": [{"label": "only"}]});
        let five_options = json!({"question": "Q?", "options": [
            {"label": "a"}, {"label": "b"}, {"label": "c"}, {"label": "d"}, {"label": "e"}
        ]});
        let cases = [
            (
                json!({"questions": []}),
                "questions\n  List should have at least 1 item after validation, not 0",
            ),
            (
                json!({"questions": [question("1"), question("2"), question("3"), question("4"), question("5")]}),
                "questions\n  List should have at most 4 items after validation, not 5",
            ),
            (
                json!({"questions": [question("1"), one_option]}),
                "questions.1.options\n  List should have at least 2 items after validation, not 1",
            ),
            (
                json!({"questions": [five_options]}),
                "questions.0.options\n  List should have at most 4 items after validation, not 5",
            ),
        ];
        for (args, detail) in cases {
            let value = call(&setup.tool, args).await;
            assert_eq!(
                value,
                ToolReturnValue::error("", format!("{prefix}{detail}"), "Invalid arguments")
            );
        }
        let missing = call(&setup.tool, json!({})).await;
        assert!(missing.is_error);
        assert!(
            missing.message.starts_with("Error validating JSON arguments: "),
            "{}",
            missing.message
        );
    }

    #[tokio::test]
    async fn schema_carries_the_limits() {
        let setup = setup();
        let params = &setup.tool.spec().parameters;
        assert_eq!(params["required"], json!(["questions"]));
        let questions = &params["properties"]["questions"];
        assert_eq!(
            (&questions["minItems"], &questions["maxItems"]),
            (&json!(1), &json!(4))
        );
        let item = &questions["items"];
        assert_eq!(item["required"], json!(["question", "options"]));
        let options = &item["properties"]["options"];
        assert_eq!(
            (&options["minItems"], &options["maxItems"]),
            (&json!(2), &json!(4))
        );
        assert_eq!(options["items"]["required"], json!(["label"]));
        assert_eq!(item["properties"]["multi_select"]["default"], json!(false));
    }
}
