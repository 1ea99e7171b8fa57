//! EnterPlanMode and ExitPlanMode: the model asks to start planning, and submits its plan for approval
//! (reference `kimi_cli/tools/plan`). Both ask through a `QuestionRequest`; the messages and briefs the
//! client shows are the reference's, the outputs the model reads are ours.
//!
//! Neither changes the project, so neither goes through approval: EnterPlanMode asks its own question
//! unless approvals are bypassed (yolo or afk), ExitPlanMode unless nobody is there (afk). A rejected plan
//! stops the turn after this step, as a rejected approval does ([`UserRejection`]).

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use kimi_core::ApprovalRuntime;
use kimi_core::ClientFlags;
use kimi_core::EventSink;
use kimi_core::PlanMode;
use kimi_core::{CallContext, Plan, Tool, UserRejection, parse_args};
use kimi_llm::ToolSpec;
use kimi_wire::message::{Event, PlanDisplay, QuestionItem, QuestionOption, ToolReturnValue};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::args;
use crate::question::{self, Answers, Reply};

/// EnterPlanMode's name.
pub const ENTER_NAME: &str = "EnterPlanMode";
/// ExitPlanMode's name.
pub const EXIT_NAME: &str = "ExitPlanMode";

/// Labels the plan question uses itself, so the model may not (compared case-insensitively).
const RESERVED_LABELS: [&str; 4] = ["approve", "reject", "reject and exit", "revise"];
const APPROVE: &str = "Approve";
const REJECT: &str = "Reject";
const REJECT_AND_EXIT: &str = "Reject and Exit";

const UNSUPPORTED: &str = "The connected client does not support plan mode. Do NOT call this tool again.";

/// What both tools share: the plan switch and the way to the user.
#[derive(Debug, Clone)]
pub struct PlanToolDeps {
    /// Plan mode and its plan file.
    pub plan: Arc<PlanMode>,
    /// Yolo and afk.
    pub approvals: Arc<ApprovalRuntime>,
    /// Whether the client answers questions.
    pub client: Arc<ClientFlags>,
    /// Where the question and the plan display go.
    pub events: EventSink,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct EnterArgs {}

/// The EnterPlanMode tool.
#[derive(Debug)]
pub struct EnterPlanMode {
    spec: ToolSpec,
    deps: PlanToolDeps,
}

impl EnterPlanMode {
    /// The tool.
    pub fn new(deps: PlanToolDeps) -> Self {
        Self {
            spec: crate::tool_spec::<EnterArgs>(ENTER_NAME, include_str!("descriptions/enter_plan_mode.md")),
            deps,
        }
    }

    async fn run(&self, tool_call_id: String, cancel: CancellationToken) -> ToolReturnValue {
        let deps = &self.deps;
        if deps.plan.is_on() {
            return ToolReturnValue::error(
                "",
                "Already in plan mode. Use ExitPlanMode when your plan is ready.",
                "Already in plan mode",
            );
        }
        let approval = deps.approvals.state();
        if approval.yolo || approval.afk {
            deps.plan.set(true);
            let output = entered_output(
                &plan_path(&deps.plan),
                "Plan mode is on (approvals are bypassed, so the user was not asked).",
            );
            return ToolReturnValue::ok_with_brief(output, "Plan mode on (auto)", "Plan mode on (auto)");
        }
        if !deps.client.supports_question() {
            return ToolReturnValue::error("", UNSUPPORTED, "Client unsupported");
        }
        let item = QuestionItem {
            question: "Enter plan mode?".into(),
            header: "Plan Mode".into(),
            options: vec![
                option("Yes", "Enter plan mode to explore and design an approach"),
                option("No", "Skip planning, start implementing now"),
            ],
            multi_select: false,
            body: String::new(),
            other_label: String::new(),
            other_description: String::new(),
        };
        match question::ask(&deps.events, tool_call_id, vec![item], &cancel).await {
            Reply::Failed => failed(),
            Reply::Dismissed => ToolReturnValue::ok_with_brief(
                "The user closed the question without choosing. Go ahead with the task without plan mode.",
                "Dismissed",
                "Dismissed",
            ),
            Reply::Answered(answers) if chose(&answers, "Yes") => {
                deps.plan.set(true);
                let output = entered_output(
                    &plan_path(&deps.plan),
                    "Plan mode is on. Do not change code now: read, investigate and plan.",
                );
                ToolReturnValue::ok_with_brief(output, "Plan mode on", "Plan mode on")
            }
            Reply::Answered(_) => ToolReturnValue::ok_with_brief(
                "The user does not want plan mode. Ask them whether to start on the implementation directly.",
                "Declined",
                "Declined",
            ),
        }
    }
}

impl Tool for EnterPlanMode {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            let _: EnterArgs = parse_args(args)?;
            Ok(Plan::interactive(Box::pin(async move {
                self.run(ctx.tool_call_id, ctx.cancel).await
            })))
        })
    }
}

// Parameters of ExitPlanMode (plain comments: doc comments would become schema descriptions).
#[derive(Debug, Deserialize, JsonSchema)]
struct ExitArgs {
    /// Alternative approaches the plan describes, two or three, for the user to pick from. Leave out when the plan has a single approach.
    #[serde(default)]
    #[schemars(length(max = 3))]
    options: Option<Vec<PlanOptionArg>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct PlanOptionArg {
    /// The approach in a few words; add "(Recommended)" to the one you suggest.
    label: String,
    /// What the approach involves and what it trades off.
    #[serde(default)]
    description: String,
}

impl ExitArgs {
    /// The reference's validators: at most three options, no reserved label, no label twice.
    fn validate(&self) -> Result<(), ToolReturnValue> {
        let Some(options) = &self.options else {
            return Ok(());
        };
        args::check_len("options", options.len(), 0, 3)?;
        for (i, option) in options.iter().enumerate() {
            if RESERVED_LABELS.contains(&option.label.trim().to_lowercase().as_str()) {
                let reserved = RESERVED_LABELS
                    .iter()
                    .map(|label| format!("'{}'", title_case(label)))
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(args::field_error(
                    &format!("options.{i}.label"),
                    &format!(
                        "Value error, Option label {} is reserved. Do not use {reserved} as option labels.",
                        kimi_llm::py_repr(&option.label)
                    ),
                ));
            }
        }
        let mut labels: Vec<&str> = options.iter().map(|o| o.label.as_str()).collect();
        labels.sort_unstable();
        if labels.windows(2).any(|pair| pair[0] == pair[1]) {
            return Err(args::field_error(
                "options",
                "Value error, Option labels must be unique. Found duplicate label(s).",
            ));
        }
        Ok(())
    }
}

/// The ExitPlanMode tool.
#[derive(Debug)]
pub struct ExitPlanMode {
    spec: ToolSpec,
    deps: PlanToolDeps,
}

impl ExitPlanMode {
    /// The tool.
    pub fn new(deps: PlanToolDeps) -> Self {
        Self {
            spec: crate::tool_spec::<ExitArgs>(EXIT_NAME, include_str!("descriptions/exit_plan_mode.md")),
            deps,
        }
    }

    async fn run(&self, options: Vec<PlanOptionArg>, ctx: CallContext) -> ToolReturnValue {
        let deps = &self.deps;
        if !deps.plan.is_on() {
            return ToolReturnValue::error(
                "",
                "Not in plan mode. ExitPlanMode is only available during plan mode.",
                "Not in plan mode",
            );
        }
        let path = plan_path(&deps.plan);
        let content = tokio::fs::read_to_string(&path).await.unwrap_or_default();
        if content.is_empty() {
            return ToolReturnValue::error(
                "",
                format!(
                    "No plan file found. Write your plan to {} first, then call ExitPlanMode.",
                    path.display()
                ),
                "No plan file",
            );
        }
        if deps.approvals.state().afk {
            deps.plan.set(false);
            let output = approved_output(
                "The plan was approved automatically (nobody is present).",
                &path,
                &content,
            );
            return ToolReturnValue::ok_with_brief(output, "Plan approved (auto)", "Plan approved (auto)");
        }
        if !deps.client.supports_question() {
            return ToolReturnValue::error("", UNSUPPORTED, "Client unsupported");
        }
        // One option is no choice: it is asked as a plain approval (reference).
        let alternatives = if options.len() >= 2 { options } else { Vec::new() };
        let mut choices: Vec<QuestionOption> = if alternatives.is_empty() {
            vec![option(APPROVE, "Exit plan mode and start execution")]
        } else {
            alternatives
                .iter()
                .map(|o| option(&o.label, &o.description))
                .collect()
        };
        choices.push(option(REJECT, "Reject and stay in plan mode"));
        choices.push(option(REJECT_AND_EXIT, "Reject and exit plan mode"));
        deps.events
            .emit(Event::PlanDisplay(PlanDisplay {
                content: content.clone(),
                file_path: path.display().to_string(),
            }))
            .await;
        let item = QuestionItem {
            question: "Approve this plan".into(),
            header: "Plan".into(),
            options: choices,
            multi_select: false,
            body: String::new(),
            other_label: "Revise".into(),
            other_description: "Stay in plan mode and provide feedback".into(),
        };
        let answers = match question::ask(&deps.events, ctx.tool_call_id, vec![item], &ctx.cancel).await {
            Reply::Failed => return failed(),
            Reply::Dismissed => {
                return ToolReturnValue::ok_with_brief(
                    "The user closed the plan without choosing. Plan mode is still on: keep refining the plan, \
                     or call ExitPlanMode again when it is ready.",
                    "Dismissed",
                    "Dismissed",
                );
            }
            Reply::Answered(answers) => answers,
        };
        decide(
            &deps.plan,
            &ctx.user_rejection,
            &alternatives,
            &answers,
            &path,
            &content,
        )
    }
}

/// Turns the user's answer into the result (and the plan-mode change it implies).
fn decide(
    plan: &PlanMode,
    rejection: &UserRejection,
    alternatives: &[PlanOptionArg],
    answers: &Answers,
    path: &Path,
    content: &str,
) -> ToolReturnValue {
    if chose(answers, REJECT_AND_EXIT) {
        plan.set(false);
        rejection.record();
        return ToolReturnValue::error(
            "",
            "Plan rejected by user. Plan mode deactivated. All tools are now available. Wait for the user's next message.",
            "Plan rejected, exited plan mode",
        );
    }
    if chose(answers, REJECT) {
        rejection.record();
        return ToolReturnValue::error(
            "",
            "Plan rejected by user. Stay in plan mode. The user will provide feedback via conversation. \
             Wait for the user's next message before revising.",
            "Plan rejected",
        );
    }
    if let Some(picked) = alternatives.iter().find(|o| chose(answers, &o.label)) {
        plan.set(false);
        let label = &picked.label;
        let output = approved_output(
            &format!(
                "The user approved the plan and picked the approach \"{label}\". Carry out that approach only and leave the others aside."
            ),
            path,
            content,
        );
        let brief = format!("Plan approved: {label}");
        return ToolReturnValue::ok_with_brief(output, brief.clone(), brief);
    }
    if alternatives.is_empty() && chose(answers, APPROVE) {
        plan.set(false);
        let output = approved_output("The user approved the plan.", path, content);
        return ToolReturnValue::ok_with_brief(output, "Plan approved", "Plan approved");
    }
    // Anything else is the free-text "Revise" answer.
    let feedback = answers
        .values()
        .rfind(|v| ![APPROVE, REJECT, REJECT_AND_EXIT].contains(&v.as_str()))
        .map_or("", String::as_str);
    let output = if feedback.is_empty() {
        "The user wants changes to the plan. Plan mode is still on; wait for their feedback before revising."
            .to_owned()
    } else {
        format!(
            "The user wants changes to the plan. Plan mode is still on; revise it using this feedback:\n\n{feedback}"
        )
    };
    ToolReturnValue::ok_with_brief(output, "Plan revision requested", "Plan revision requested")
}

impl Tool for ExitPlanMode {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            let args: ExitArgs = parse_args(args)?;
            args.validate()?;
            let options = args.options.unwrap_or_default();
            Ok(Plan::interactive(Box::pin(async move {
                self.run(options, ctx).await
            })))
        })
    }
}

fn option(label: &str, description: &str) -> QuestionOption {
    QuestionOption {
        label: label.to_owned(),
        description: description.to_owned(),
    }
}

/// Did the user pick `label` (exact match, as the reference)?
fn chose(answers: &Answers, label: &str) -> bool {
    answers.values().any(|v| v == label)
}

fn failed() -> ToolReturnValue {
    ToolReturnValue::error("", "Failed to get user response.", "Question failed")
}

/// The plan file; plan mode being on guarantees a plan session, so the fallback is never used.
fn plan_path(plan: &PlanMode) -> std::path::PathBuf {
    plan.file().unwrap_or_default()
}

fn entered_output(path: &Path, status: &str) -> String {
    format!(
        "{status}\nPlan file: {}\nNext: work out the open questions about the code (Agent with subagent_type='explore' \
         can investigate for you), choose an approach, write the plan to the plan file (create it with WriteFile \
         first), then call ExitPlanMode. Use AskUserQuestion only for missing requirements or to choose between \
         approaches, never to ask for approval of the plan.",
        path.display()
    )
}

fn approved_output(status: &str, path: &Path, content: &str) -> String {
    format!(
        "{status} Plan mode is off and every tool is available again.\nPlan saved to: {}\n\n## Approved Plan:\n{content}",
        path.display()
    )
}

/// Python's `str.title()` for our ASCII labels.
fn title_case(text: &str) -> String {
    text.split(' ')
        .map(|word| {
            let mut chars = word.chars();
            chars
                .next()
                .map(|first| first.to_uppercase().chain(chars).collect::<String>())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}
