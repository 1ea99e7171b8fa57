//! Where each server's connection stands, and the wire snapshot of all of them. No I/O here.

use kimi_wire::message::{McpServerState, McpServerStatus, McpStatus};

/// The connection state of one server (reference `MCPServerInfo.status`).
///
/// `Pending → Connecting → Connected | Failed | Unauthorized`; an OAuth server without stored tokens
/// starts and stays `Unauthorized`, one whose token cannot be refreshed ends there. A connected server that crashes goes back through `Connecting` on its next use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// Configured, not started.
    Pending,
    /// Starting, handshaking or listing tools.
    Connecting,
    /// Ready; its tools are registered.
    Connected,
    /// Could not be started, initialized or listed; `error` says why.
    Failed {
        /// The reason, for logs and `mcp test`.
        error: String,
    },
    /// An OAuth server without a usable token: none stored (never started), or expired and the refresh
    /// failed (`mcp auth` again).
    Unauthorized,
}

impl ServerState {
    /// The wire's name for this state.
    pub fn wire(&self) -> McpServerState {
        match self {
            Self::Pending => McpServerState::Pending,
            Self::Connecting => McpServerState::Connecting,
            Self::Connected => McpServerState::Connected,
            Self::Failed { .. } => McpServerState::Failed,
            Self::Unauthorized => McpServerState::Unauthorized,
        }
    }
}

/// What the snapshot needs to know about one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerView {
    /// Configured name.
    pub name: String,
    /// State.
    pub state: ServerState,
    /// Names of its tools registered in the toolset.
    pub tools: Vec<String>,
}

/// The reference's `mcp_status_snapshot`: `None` without servers.
pub fn snapshot(loading: bool, servers: &[ServerView]) -> Option<McpStatus> {
    if servers.is_empty() {
        return None;
    }
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    Some(McpStatus {
        loading,
        connected: count(
            servers
                .iter()
                .filter(|s| s.state == ServerState::Connected)
                .count(),
        ),
        total: count(servers.len()),
        tools: count(servers.iter().map(|s| s.tools.len()).sum()),
        servers: servers
            .iter()
            .map(|s| McpServerStatus {
                name: s.name.clone(),
                status: s.state.wire(),
                tools: s.tools.clone(),
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn no_servers_no_status() {
        assert_eq!(snapshot(false, &[]), None);
    }

    #[test]
    fn counts_connected_servers_and_their_tools() {
        let servers = [
            ServerView {
                name: "a".into(),
                state: ServerState::Connected,
                tools: vec!["x".into(), "y".into()],
            },
            ServerView {
                name: "b".into(),
                state: ServerState::Failed { error: "boom".into() },
                tools: vec![],
            },
            ServerView {
                name: "c".into(),
                state: ServerState::Unauthorized,
                tools: vec![],
            },
        ];
        let status = snapshot(true, &servers).unwrap();
        assert_eq!(
            (status.loading, status.connected, status.total, status.tools),
            (true, 1, 3, 2)
        );
        let states: Vec<_> = status.servers.iter().map(|s| s.status).collect();
        assert_eq!(
            states,
            [
                McpServerState::Connected,
                McpServerState::Failed,
                McpServerState::Unauthorized
            ]
        );
    }
}
