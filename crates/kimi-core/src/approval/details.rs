//! Which clients get approval details: the note saying what "approve for session" covers on the kinds
//! of request whose text the reference fixes, and the display blocks a tool shows only then (an MCP
//! call's arguments).
//!
//! The reference's own clients and e2e suite match those requests' exact description and their empty
//! `display`, and they do not name themselves in `initialize`. Front-ends that show approvals to a
//! person (the TypeScript SDK, the VS Code extension) name themselves. So unless the configuration
//! decides for every client, details go to a client that names itself (`client.name`) or asks for
//! every event (`capabilities.events: ["*"]`), and to nobody before `initialize`.

use kimi_wire::params::InitializeParams;

/// `approval_details` of the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApprovalDetails {
    /// Unset: decided per client at `initialize` (see the module docs).
    #[default]
    Auto,
    /// `true`: every client gets details.
    Always,
    /// `false`: no client does; requests keep the reference's texts.
    Never,
}

impl From<Option<bool>> for ApprovalDetails {
    fn from(setting: Option<bool>) -> Self {
        match setting {
            None => Self::Auto,
            Some(true) => Self::Always,
            Some(false) => Self::Never,
        }
    }
}

impl ApprovalDetails {
    /// Whether the client that sent `initialize` with `params` gets details; `None` when no client has
    /// initialized (yet).
    pub fn shows_details(self, params: Option<&InitializeParams>) -> bool {
        match self {
            Self::Always => true,
            Self::Never => false,
            Self::Auto => params.is_some_and(|params| {
                let named = params
                    .client
                    .as_ref()
                    .is_some_and(|client| !client.name.trim().is_empty());
                let wants_every_event = params
                    .capabilities
                    .as_ref()
                    .is_some_and(|capabilities| capabilities.wants_every_event());
                named || wants_every_event
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn params(value: serde_json::Value) -> InitializeParams {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_setting_maps_to_the_policy() {
        assert_eq!(ApprovalDetails::from(None), ApprovalDetails::Auto);
        assert_eq!(ApprovalDetails::from(Some(true)), ApprovalDetails::Always);
        assert_eq!(ApprovalDetails::from(Some(false)), ApprovalDetails::Never);
    }

    #[test]
    fn each_policy_decides_for_each_kind_of_client() {
        let named = params(json!({"protocol_version": "1.7", "client": {"name": "kimi-agent-sdk/0.1.8"}}));
        let anonymous = params(json!({"protocol_version": "1.10"}));
        let blank_name = params(json!({"protocol_version": "1.10", "client": {"name": "  "}}));
        let every_event = params(json!({"protocol_version": "1.10", "capabilities": {"events": ["*"]}}));
        let some_events =
            params(json!({"protocol_version": "1.10", "capabilities": {"events": ["TurnBegin"]}}));
        let clients: [(&str, Option<&InitializeParams>); 6] = [
            ("named", Some(&named)),
            ("anonymous", Some(&anonymous)),
            ("blank name", Some(&blank_name)),
            ("every event", Some(&every_event)),
            ("some events", Some(&some_events)),
            ("no initialize", None),
        ];
        let expected = [
            (ApprovalDetails::Auto, [true, false, false, true, false, false]),
            (ApprovalDetails::Always, [true; 6]),
            (ApprovalDetails::Never, [false; 6]),
        ];
        for (policy, shows) in expected {
            for ((client, params), shows) in clients.iter().zip(shows) {
                assert_eq!(
                    policy.shows_details(*params),
                    shows,
                    "{policy:?} for a {client} client"
                );
            }
        }
    }
}
