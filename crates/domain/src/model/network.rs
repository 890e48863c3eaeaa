//! Network addresses: the ranges of an IP allowlist and of the trusted proxies.

use std::{fmt, net::IpAddr};

use ipnet::IpNet;

use super::text::from_str_by_parse;

/// An IPv4 or IPv6 address, or a CIDR range of them (`203.0.113.7`, `10.0.0.0/8`,
/// `2001:db8::/32`). A bare address is a range of one. IPv4-mapped IPv6 addresses
/// (`::ffff:192.0.2.1`) are compared as the IPv4 address they carry.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpRange(IpNet);

/// The text is neither an IP address nor a CIDR range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("must be an IPv4 or IPv6 address or a CIDR range such as 10.0.0.0/8")]
pub struct IpRangeError;

impl IpRange {
    /// Trims `raw` and reads an address or a CIDR range. Host bits past the prefix are
    /// cleared (`10.1.2.3/8` is `10.0.0.0/8`); a bare IPv4-mapped IPv6 address becomes the
    /// IPv4 address it carries.
    pub fn parse(raw: &str) -> Result<Self, IpRangeError> {
        let raw = raw.trim();
        if let Ok(addr) = raw.parse::<IpAddr>() {
            return Ok(Self(IpNet::from(addr.to_canonical())));
        }
        let net = raw.parse::<IpNet>().map_err(|_| IpRangeError)?;
        Ok(Self(net.trunc()))
    }

    /// Whether the address lies in the range.
    pub fn contains(&self, addr: IpAddr) -> bool {
        self.0.contains(&addr.to_canonical())
    }
}

from_str_by_parse!(IpRange, IpRangeError);

/// A range of one is written as the bare address; a wider range in CIDR form.
impl fmt::Display for IpRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.prefix_len() == self.0.max_prefix_len() {
            write!(f, "{}", self.0.addr())
        } else {
            write!(f, "{}", self.0)
        }
    }
}

impl fmt::Debug for IpRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IpRange({self})")
    }
}

impl serde::Serialize for IpRange {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for IpRange {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

/// Where a request comes from, as far as the service can tell: the socket's peer, or the
/// address a trusted proxy reports for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClientAddress(pub IpAddr);

impl ClientAddress {
    /// The client behind a chain of proxies. `forwarded_for` lists the `X-Forwarded-For`
    /// addresses in header order (the client first, each proxy appending the address it
    /// received from). Starting from the socket's peer, each hop is believed only while the
    /// address that reported it is a trusted proxy; the first address not trusted is the
    /// client. An address that does not parse stops the walk at the last believed hop.
    pub fn resolve(peer: IpAddr, forwarded_for: &[&str], trusted: &[IpRange]) -> Self {
        let is_trusted = |addr: IpAddr| trusted.iter().any(|range| range.contains(addr));
        let mut client = peer.to_canonical();
        for hop in forwarded_for.iter().rev() {
            if !is_trusted(client) {
                break;
            }
            match hop.trim().parse::<IpAddr>() {
                Ok(addr) => client = addr.to_canonical(),
                Err(_) => break,
            }
        }
        Self(client)
    }
}

impl fmt::Display for ClientAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::testing::refuses_each;

    fn ip(raw: &str) -> IpAddr {
        raw.parse().unwrap()
    }

    fn ranges(raw: &[&str]) -> Vec<IpRange> {
        raw.iter().map(|r| IpRange::parse(r).unwrap()).collect()
    }

    #[test]
    fn addresses_and_cidr_ranges_parse() {
        assert_eq!(
            IpRange::parse("203.0.113.7").unwrap().to_string(),
            "203.0.113.7"
        );
        assert_eq!(
            IpRange::parse(" 10.0.0.0/8 ").unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(
            IpRange::parse("2001:db8::/32").unwrap().to_string(),
            "2001:db8::/32"
        );
        assert_eq!(IpRange::parse("::1").unwrap().to_string(), "::1");
        // Host bits are cleared: the range is what matters.
        assert_eq!(
            IpRange::parse("10.1.2.3/8").unwrap().to_string(),
            "10.0.0.0/8"
        );
        refuses_each(
            IpRange::parse,
            &[
                "",
                "example.com",
                "10.0.0.0/33",
                "10.0.0",
                "1.2.3.4/",
                "::g",
            ],
            IpRangeError,
        );
    }

    #[test]
    fn containment_treats_mapped_ipv6_as_ipv4() {
        let office = IpRange::parse("192.0.2.0/24").unwrap();
        assert!(office.contains(ip("192.0.2.200")));
        assert!(office.contains(ip("::ffff:192.0.2.200")));
        assert!(!office.contains(ip("192.0.3.1")));
        let one = IpRange::parse("::ffff:198.51.100.1").unwrap();
        assert!(one.contains(ip("198.51.100.1")));
    }

    #[test]
    fn forwarded_for_is_believed_only_from_trusted_proxies() {
        let trusted = ranges(&["10.0.0.0/8"]);
        // No proxy trusted: the peer is the client, whatever the header claims.
        assert_eq!(
            ClientAddress::resolve(ip("198.51.100.9"), &["1.1.1.1"], &trusted).0,
            ip("198.51.100.9")
        );
        // A trusted proxy reports the client.
        assert_eq!(
            ClientAddress::resolve(ip("10.0.0.2"), &["203.0.113.5"], &trusted).0,
            ip("203.0.113.5")
        );
        // Two trusted hops; the spoofed first entry, added by the client itself, is not
        // believed because 203.0.113.5 is no proxy of ours.
        assert_eq!(
            ClientAddress::resolve(
                ip("10.0.0.2"),
                &["6.6.6.6", "203.0.113.5", "10.0.0.3"],
                &trusted
            )
            .0,
            ip("203.0.113.5")
        );
        // A trusted proxy without the header: the proxy is the client.
        assert_eq!(
            ClientAddress::resolve(ip("10.0.0.2"), &[], &trusted).0,
            ip("10.0.0.2")
        );
        // Garbage stops the walk at the last believed hop.
        assert_eq!(
            ClientAddress::resolve(ip("10.0.0.2"), &["nonsense"], &trusted).0,
            ip("10.0.0.2")
        );
    }
}
