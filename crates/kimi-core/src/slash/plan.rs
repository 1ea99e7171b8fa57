//! `/plan [on|off|view|clear]`: plan mode by hand (reference `slash.py` `plan`). Without an argument it
//! toggles. Texts are the reference's.

use kimi_wire::message::{Event, StatusUpdate};

use crate::soul::Soul;

impl Soul {
    pub(super) async fn plan_command(&self, args: &str) {
        match args.trim().to_lowercase().as_str() {
            "on" => {
                self.set_plan_mode(true);
                let path = self.plan_file_display();
                self.say(&format!("Plan mode ON. Plan file: {path}")).await;
                self.plan_status().await;
            }
            "off" => {
                self.set_plan_mode(false);
                self.say("Plan mode OFF. All tools are now available.").await;
                self.plan_status().await;
            }
            "view" => match self.current_plan() {
                Some(plan) => self.say(&plan).await,
                None => self.say("No plan file found for this session.").await,
            },
            "clear" => {
                if let Some(path) = self.plan_file()
                    && let Err(e) = std::fs::remove_file(&path)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    tracing::warn!(path = %path.display(), error = %e, "plan file not removed");
                }
                self.say("Plan cleared.").await;
            }
            _ => {
                let enabled = !self.plan_mode();
                self.set_plan_mode(enabled);
                if enabled {
                    let path = self.plan_file_display();
                    self.say(&format!(
                        "Plan mode ON. Write your plan to: {path}\nUse ExitPlanMode when done, or /plan off to exit manually."
                    ))
                    .await;
                } else {
                    self.say("Plan mode OFF. All tools are now available.").await;
                }
                self.plan_status().await;
            }
        }
    }

    /// The plan file of this session's plan, whether or not plan mode is on.
    fn plan_file(&self) -> Option<std::path::PathBuf> {
        self.plan_state().file()
    }

    fn plan_file_display(&self) -> String {
        self.plan_file()
            .map_or_else(|| "None".to_owned(), |p| p.display().to_string())
    }

    /// The plan's text, when the file exists and is not empty.
    fn current_plan(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.plan_file()?).ok()?;
        (!text.is_empty()).then_some(text)
    }

    /// `StatusUpdate{plan_mode}`, recorded like `set_plan_mode`'s.
    async fn plan_status(&self) {
        let update = StatusUpdate {
            plan_mode: Some(self.plan_mode()),
            ..StatusUpdate::default()
        };
        self.events.emit(Event::StatusUpdate(update)).await;
    }
}
