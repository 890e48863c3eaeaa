//! Which addresses a webhook may be sent to: the SSRF rule, one place for it. The endpoint URL's
//! rule (a literal address in the URL) and the delivery adapter's (every address a name resolves
//! to, and the peer it connects to) both ask [`is_public_address`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IPv4 ranges that are not the public internet: "this network", private, carrier-grade NAT,
/// loopback, link-local (the cloud metadata address 169.254.169.254 among them), IETF protocol
/// assignments, documentation, 6to4 relay anycast, benchmarking, multicast, reserved and
/// broadcast.
const NOT_PUBLIC_V4: &[(u32, u32)] = &[
    (0x0000_0000, 8),  // 0.0.0.0/8
    (0x0a00_0000, 8),  // 10.0.0.0/8
    (0x6440_0000, 10), // 100.64.0.0/10
    (0x7f00_0000, 8),  // 127.0.0.0/8
    (0xa9fe_0000, 16), // 169.254.0.0/16
    (0xac10_0000, 12), // 172.16.0.0/12
    (0xc000_0000, 24), // 192.0.0.0/24
    (0xc000_0200, 24), // 192.0.2.0/24
    (0xc058_6300, 24), // 192.88.99.0/24
    (0xc0a8_0000, 16), // 192.168.0.0/16
    (0xc612_0000, 15), // 198.18.0.0/15
    (0xc633_6400, 24), // 198.51.100.0/24
    (0xcb00_7100, 24), // 203.0.113.0/24
    (0xe000_0000, 4),  // 224.0.0.0/4
    (0xf000_0000, 4),  // 240.0.0.0/4, 255.255.255.255 included
];

/// Ranges inside global unicast (2000::/3) that are not the public internet: IETF protocol
/// assignments (Teredo among them), documentation and SRv6 SIDs. 6to4 is handled apart.
const NOT_PUBLIC_V6: &[(u128, u32)] = &[
    (0x2001_0000_0000_0000_0000_0000_0000_0000, 23), // 2001::/23
    (0x2001_0db8_0000_0000_0000_0000_0000_0000, 32), // 2001:db8::/32
    (0x3fff_0000_0000_0000_0000_0000_0000_0000, 20), // 3fff::/20
    (0x5f00_0000_0000_0000_0000_0000_0000_0000, 16), // 5f00::/16
];

const GLOBAL_UNICAST_V6: (u128, u32) = (0x2000_0000_0000_0000_0000_0000_0000_0000, 3);
const SIX_TO_FOUR: (u128, u32) = (0x2002_0000_0000_0000_0000_0000_0000_0000, 16);
const NAT64: (u128, u32) = (0x0064_ff9b_0000_0000_0000_0000_0000_0000, 96);
const IPV4_MAPPED: (u128, u32) = (0x0000_0000_0000_0000_0000_ffff_0000_0000, 96);

/// Whether `ip` is a public internet address that a webhook may be sent to.
///
/// Refused: loopback, private (10/8, 172.16/12, 192.168/16), carrier-grade NAT (100.64/10),
/// link-local (169.254/16, fe80::/10), unique-local (fc00::/7), site-local (fec0::/10),
/// unspecified, broadcast, multicast, documentation and benchmarking ranges, the other IETF
/// special-purpose blocks, and every IPv6 address outside global unicast (2000::/3). An IPv6
/// address that embeds an IPv4 one (IPv4-mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`,
/// 6to4 `2002:aabb:ccdd::`) is judged by the IPv4 address it leads to.
pub fn is_public_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let bits = u32::from(ip);
    !NOT_PUBLIC_V4
        .iter()
        .any(|&(prefix, len)| bits & mask32(len) == prefix)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let bits = u128::from(ip);
    let within = |(prefix, len): (u128, u32)| bits & mask128(len) == prefix;
    let embedded_v4 = |shift: u32| {
        // Truncation intended: the 32 bits at `shift` are the IPv4 address.
        let v4 = (bits >> shift) as u32;
        is_public_v4(Ipv4Addr::from(v4))
    };
    if within(IPV4_MAPPED) || within(NAT64) {
        return embedded_v4(0);
    }
    if within(SIX_TO_FOUR) {
        return embedded_v4(80);
    }
    within(GLOBAL_UNICAST_V6) && !NOT_PUBLIC_V6.iter().any(|&range| within(range))
}

const fn mask32(len: u32) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len)
    }
}

const fn mask128(len: u32) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn public(ip: &str) -> bool {
        is_public_address(
            ip.parse()
                .unwrap_or_else(|_| panic!("{ip} is not an address")),
        )
    }

    #[test]
    fn private_and_special_ipv4_addresses_are_refused() {
        for ip in [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "10.255.255.255",
            "100.64.0.1",
            "100.127.255.255",
            "127.0.0.1",
            "127.1.2.3",
            "169.254.169.254",
            "169.254.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.88.99.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
        ] {
            assert!(!public(ip), "{ip} must be refused");
        }
    }

    #[test]
    fn public_ipv4_addresses_are_allowed() {
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "126.255.255.255",
            "128.0.0.1",
            "169.253.255.255",
            "172.15.255.255",
            "172.32.0.1",
            "192.0.1.1",
            "192.169.0.1",
            "198.20.0.1",
            "203.0.114.1",
            "223.255.255.255",
        ] {
            assert!(public(ip), "{ip} must be allowed");
        }
    }

    #[test]
    fn private_and_special_ipv6_addresses_are_refused() {
        for ip in [
            "::",
            "::1",
            "::127.0.0.1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:0.0.0.0",
            "64:ff9b::10.0.0.1",
            "64:ff9b::127.0.0.1",
            "64:ff9b:1::1",
            "100::1",
            "2001::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:db8::1",
            "2002:7f00:0001::1",
            "2002:0a00:0001::1",
            "2002:a9fe:a9fe::1",
            "3fff::1",
            "5f00::1",
            "fc00::1",
            "fd12:3456:789a::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "ff05::1:3",
            "1::1",
            "4000::1",
        ] {
            assert!(!public(ip), "{ip} must be refused");
        }
    }

    #[test]
    fn public_ipv6_addresses_are_allowed() {
        for ip in [
            "2606:4700:4700::1111",
            "2a00:1450:4001:80b::200e",
            "2001:4860:4860::8888",
            "::ffff:1.1.1.1",
            "64:ff9b::8.8.8.8",
            "2002:0808:0808::1",
        ] {
            assert!(public(ip), "{ip} must be allowed");
        }
    }
}
