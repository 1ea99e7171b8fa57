//! What FetchURL may reach: no loopback, private, link-local or unique-local address unless the
//! configuration allows the host (`fetch_allow_private_hosts`), checked on the address every hop
//! really connects to.
//!
//! A host name is resolved here ([`GuardedResolver`]) and reqwest connects to exactly the addresses we
//! return, so a DNS answer cannot point a checked name somewhere else between the check and the
//! connection. An address written in the URL (`127.1`, `2130706433`, `[::ffff:127.0.0.1]`: the URL
//! parser has already turned each into a plain IP) never reaches a resolver, so [`Guard::check_url`]
//! looks at it before the first request and at every redirect. Proxies from the environment are not
//! used (the reference's HTTP client ignores them too): through a proxy the name would be resolved
//! where we cannot check it.

use std::error::Error as StdError;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, OnceLock};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::redirect;
use reqwest::{Client, Url};

use super::Timeouts;

/// Redirects followed at most (reqwest's and aiohttp's default).
const MAX_REDIRECTS: usize = 10;

/// Host names and addresses from the configuration: `example.com` (any letter case), `*.example.com`
/// (its subdomains), an IP address (`10.0.0.5`, `::1` or `[::1]`). Ports are not part of a host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostList {
    names: Vec<String>,
    suffixes: Vec<String>,
    ips: Vec<IpAddr>,
}

impl HostList {
    /// The list from its configuration entries; empty entries are skipped.
    pub fn new<S: AsRef<str>>(entries: impl IntoIterator<Item = S>) -> Self {
        let mut list = Self::default();
        for entry in entries {
            let entry = entry.as_ref().trim().trim_end_matches('.').to_ascii_lowercase();
            let bare = entry.trim_start_matches('[').trim_end_matches(']');
            if let Ok(ip) = bare.parse::<IpAddr>() {
                list.ips.push(ip);
            } else if let Some(suffix) = entry.strip_prefix("*.") {
                list.suffixes.push(format!(".{suffix}"));
            } else if !entry.is_empty() {
                list.names.push(entry);
            }
        }
        list
    }

    /// Whether `host` (a name or an address, as a URL holds it) is on the list.
    pub fn contains(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return self.ips.contains(&ip);
        }
        self.names.contains(&host) || self.suffixes.iter().any(|s| host.ends_with(s))
    }
}

/// The refusal: `host` led to `address`, which is not on the public internet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivateAddress {
    /// The host as the URL named it.
    pub host: String,
    /// The address it is, or resolved to.
    pub address: IpAddr,
}

impl fmt::Display for PrivateAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is a local-network address ({}), which FetchURL does not reach unless the configuration lists the host in `fetch_allow_private_hosts`",
            self.host, self.address
        )
    }
}

impl StdError for PrivateAddress {}

impl PrivateAddress {
    /// The refusal found anywhere in `error`'s chain of causes.
    pub fn find<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a Self> {
        let mut current = Some(error);
        while let Some(error) = current {
            if let Some(found) = error.downcast_ref::<Self>() {
                return Some(found);
            }
            current = error.source();
        }
        None
    }
}

/// Whether `ip` is anything but a public unicast address: loopback, private (RFC 1918), shared
/// (CGNAT), link-local, unique-local, unspecified, broadcast, multicast, reserved, and IPv6 forms that
/// embed such an IPv4 address (mapped, compatible, NAT64, 6to4).
pub fn is_local_network(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_local_v4(v4),
        IpAddr::V6(v6) => is_local_v6(v6),
    }
}

fn is_local_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0 // "this network", 0.0.0.0 reaches the local host
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240 // reserved
}

fn is_local_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    if ip.is_loopback() || ip.is_unspecified() || ip.is_multicast() {
        return true;
    }
    let first = segments[0];
    if (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfe80 || (first & 0xffc0) == 0xfec0 {
        // Unique-local, link-local, and the old site-local.
        return true;
    }
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_local_v4(v4);
    }
    let embedded_low = || Ipv4Addr::from(((segments[6] as u32) << 16) | segments[7] as u32);
    // IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::/96, 64:ff9b:1::/48) carry it in the low bits.
    let nat64 = segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] || segments[..3] == [0x64, 0xff9b, 1];
    if segments[..6] == [0; 6] || nat64 {
        return is_local_v4(embedded_low());
    }
    // 6to4 (2002::/16) carries it in the second and third segments.
    if first == 0x2002 {
        return is_local_v4(Ipv4Addr::from(((segments[1] as u32) << 16) | segments[2] as u32));
    }
    false
}

/// Whether `name` is `localhost` or one of its subdomains.
fn is_localhost(name: &str) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost")
}

/// What the page client may reach.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    /// Hosts that may be (or resolve to) local-network addresses.
    pub allow_private: HostList,
}

impl Guard {
    /// Refuses a URL whose host is a local-network address written out (names are checked when they
    /// are resolved).
    pub fn check_url(&self, url: &Url) -> Result<(), PrivateAddress> {
        // The URL parser writes every address form out plainly (`127.1` is `127.0.0.1`); `localhost`
        // and its subdomains are loopback by definition (RFC 6761), whatever a resolver says.
        let host = url.host_str().unwrap_or_default();
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let address = match bare.parse::<IpAddr>() {
            Ok(address) => address,
            Err(_) if is_localhost(bare) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            Err(_) => return Ok(()),
        };
        if is_local_network(address) && !self.allow_private.contains(host) {
            return Err(PrivateAddress {
                host: host.to_owned(),
                address,
            });
        }
        Ok(())
    }

    /// The addresses of `host` that may be connected to: all of them when the host is allowed, else
    /// all of them provided none is a local-network address (one such answer refuses the name, so a
    /// rebinding DNS server cannot slip one in).
    fn vet(&self, host: &str, addresses: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, PrivateAddress> {
        if self.allow_private.contains(host) {
            return Ok(addresses);
        }
        match addresses.iter().find(|a| is_local_network(a.ip())) {
            Some(local) => Err(PrivateAddress {
                host: host.to_owned(),
                address: local.ip(),
            }),
            None => Ok(addresses),
        }
    }
}

/// Resolves with the system resolver, then lets through only what [`Guard`] allows.
#[derive(Debug)]
struct GuardedResolver(Arc<Guard>);

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = Arc::clone(&self.0);
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let vetted = guard.vet(&host, found)?;
            let addrs: Addrs = Box::new(vetted.into_iter());
            Ok(addrs)
        })
    }
}

/// A page client bound to a [`Guard`], built on first use (building loads the root certificates).
#[derive(Debug)]
pub struct GuardedClient {
    guard: Arc<Guard>,
    timeouts: Timeouts,
    client: OnceLock<Client>,
}

impl GuardedClient {
    /// A client for page requests with `timeouts`, not built yet.
    pub fn new(guard: Guard, timeouts: Timeouts) -> Self {
        Self {
            guard: Arc::new(guard),
            timeouts,
            client: OnceLock::new(),
        }
    }

    /// The guard, for checking the first URL before it is requested.
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// The client, built now if this is the first call.
    pub fn get(&self) -> Result<&Client, reqwest::Error> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        kimi_llm::install_tls_provider();
        let guard = Arc::clone(&self.guard);
        let policy = redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= MAX_REDIRECTS {
                return attempt.error("too many redirects");
            }
            match guard.check_url(attempt.url()) {
                Ok(()) => attempt.follow(),
                Err(refused) => attempt.error(refused),
            }
        });
        let built = Client::builder()
            .connect_timeout(self.timeouts.connect)
            .read_timeout(self.timeouts.read)
            .timeout(self.timeouts.total)
            .no_proxy()
            .redirect(policy)
            .dns_resolver(Arc::new(GuardedResolver(Arc::clone(&self.guard))))
            .build()?;
        // Two first calls racing both build; one client is kept.
        Ok(self.client.get_or_init(|| built))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn local_network_addresses_in_every_spelling() {
        for local in [
            "127.0.0.1",
            "127.1.2.3",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
        ] {
            assert!(is_local_network(ip(local)), "{local}");
        }
        for public in [
            "1.1.1.1",
            "93.184.216.34",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "2002:808:808::",
        ] {
            assert!(!is_local_network(ip(public)), "{public}");
        }
    }

    #[test]
    fn urls_spell_addresses_many_ways_and_all_are_caught() {
        let guard = Guard::default();
        for url in [
            "http://127.0.0.1:9/",
            "http://[::1]/",
            "http://2130706433/",
            "http://127.1/",
            "http://0x7f.0.0.1/",
            "http://[::ffff:7f00:1]/",
            "http://0/",
        ] {
            let refused = guard.check_url(&Url::parse(url).unwrap()).unwrap_err();
            assert!(is_local_network(refused.address), "{url}");
        }
        // `localhost` is loopback by name; other names are left to the resolver.
        for url in [
            "http://localhost/",
            "http://LOCALHOST./",
            "http://api.localhost:8/",
        ] {
            assert!(guard.check_url(&Url::parse(url).unwrap()).is_err(), "{url}");
        }
        assert!(
            guard
                .check_url(&Url::parse("http://example.com/").unwrap())
                .is_ok()
        );
        assert!(guard.check_url(&Url::parse("http://1.1.1.1/").unwrap()).is_ok());
    }

    #[test]
    fn allowed_hosts_pass() {
        let guard = Guard {
            allow_private: HostList::new(["127.0.0.1", "Intranet.Example.", "*.corp", "[::1]", ""]),
        };
        assert!(
            guard
                .check_url(&Url::parse("http://127.0.0.1:8080/x").unwrap())
                .is_ok()
        );
        assert!(guard.check_url(&Url::parse("http://[::1]/").unwrap()).is_ok());
        assert!(
            guard
                .check_url(&Url::parse("http://127.0.0.2/").unwrap())
                .is_err()
        );
        let local = vec![SocketAddr::from(([10, 0, 0, 1], 0))];
        assert_eq!(guard.vet("intranet.example", local.clone()), Ok(local.clone()));
        assert_eq!(guard.vet("wiki.corp", local.clone()), Ok(local.clone()));
        assert!(guard.vet("corp", local).is_err());
        let mixed = vec![
            SocketAddr::from(([1, 1, 1, 1], 0)),
            SocketAddr::from(([127, 0, 0, 1], 0)),
        ];
        assert_eq!(
            guard.vet("rebind.example", mixed),
            Err(PrivateAddress {
                host: "rebind.example".into(),
                address: ip("127.0.0.1"),
            })
        );
    }

    #[tokio::test]
    async fn the_resolver_refuses_names_of_local_addresses() {
        let resolver = GuardedResolver(Arc::new(Guard::default()));
        let error = resolver
            .resolve("localhost".parse().unwrap())
            .await
            .err()
            .unwrap();
        let refused = PrivateAddress::find(error.as_ref()).unwrap();
        assert_eq!(refused.host, "localhost");
        assert!(refused.address.is_loopback());
    }
}
