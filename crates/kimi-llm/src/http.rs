//! HTTP clients built on first use.
//!
//! Building a `reqwest::Client` loads and parses the system's root certificates, which was the largest
//! single cost of starting a session (about half of the time to answer `initialize`). Most sessions
//! start far more often than they go online through a given client, so each client is built when it
//! is first needed and kept for the session.

use std::sync::OnceLock;
use std::time::Duration;

use crate::install_tls_provider;

/// The timeouts of one client; `None` leaves reqwest's default (none).
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientTimeouts {
    /// Establishing the connection.
    pub connect: Option<Duration>,
    /// Between two reads of the response.
    pub read: Option<Duration>,
    /// The whole request.
    pub total: Option<Duration>,
}

/// A `reqwest::Client` with fixed settings, built by the first [`LazyClient::get`].
#[derive(Debug)]
pub struct LazyClient {
    timeouts: ClientTimeouts,
    client: OnceLock<reqwest::Client>,
}

impl LazyClient {
    /// A client with `timeouts`, not built yet.
    pub const fn new(timeouts: ClientTimeouts) -> Self {
        Self {
            timeouts,
            client: OnceLock::new(),
        }
    }

    /// The client, built now if this is the first call. A failed build is not kept: the next call
    /// tries again.
    pub fn get(&self) -> Result<&reqwest::Client, reqwest::Error> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        install_tls_provider();
        let ClientTimeouts { connect, read, total } = self.timeouts;
        let mut builder = reqwest::Client::builder();
        if let Some(connect) = connect {
            builder = builder.connect_timeout(connect);
        }
        if let Some(read) = read {
            builder = builder.read_timeout(read);
        }
        if let Some(total) = total {
            builder = builder.timeout(total);
        }
        let built = builder.build()?;
        // Two first calls racing both build; one client is kept, the other dropped.
        Ok(self.client.get_or_init(|| built))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_is_built_once_on_first_use() {
        let lazy = LazyClient::new(ClientTimeouts::default());
        assert!(lazy.client.get().is_none());
        let first: *const reqwest::Client = lazy.get().unwrap();
        let second: *const reqwest::Client = lazy.get().unwrap();
        assert_eq!(first, second);
    }
}
