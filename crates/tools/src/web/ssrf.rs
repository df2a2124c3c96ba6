//! SSRF address screening: a pure judgement of one IP address under a policy.
//!
//! Every address is put in one of three classes ([`AddressClass`]):
//! - **public**: always allowed;
//! - **private** (loopback, RFC 1918, CGNAT `100.64.0.0/10`, ULA `fc00::/7`): allowed only
//!   with [`SsrfPolicy::allow_private_network`];
//! - **forbidden** (cloud metadata endpoints, link-local, multicast, broadcast, unspecified,
//!   documentation/benchmarking/reserved ranges, `240.0.0.0/4`, IPv6 outside `2000::/3`):
//!   refused always, with or without the opt-in.
//!
//! IPv6 transition forms are unwrapped first, so an address is judged by the IPv4 address it
//! actually reaches: IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`,
//! IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::/96` and the local-use `64:ff9b:1::/48`,
//! 6to4 `2002::/16` (IPv4 in bits 16–48) and Teredo `2001::/32` (client IPv4 = the bitwise
//! NOT of the last 32 bits).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What the caller allows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SsrfPolicy {
    /// Allow private addresses (`tools.allow_private_network`). Forbidden ones stay refused.
    pub allow_private_network: bool,
}

/// The class of an address, with the reason for non-public ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// A globally routable address.
    Public,
    /// An internal address: allowed only with the private-network opt-in.
    Private(&'static str),
    /// Never allowed.
    Forbidden(&'static str),
}

impl AddressClass {
    pub fn is_public(self) -> bool {
        matches!(self, AddressClass::Public)
    }
}

/// Why an address was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The address as connected (before unwrapping).
    pub addr: IpAddr,
    /// The class it fell in (never `Public`).
    pub class: AddressClass,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.class {
            AddressClass::Private(reason) => write!(
                f,
                "{} is a private address ({reason}); private networks are refused unless \
                 tools.allow_private_network is enabled",
                self.addr
            ),
            AddressClass::Forbidden(reason) => write!(
                f,
                "{} is never allowed ({reason}), even with tools.allow_private_network",
                self.addr
            ),
            AddressClass::Public => write!(f, "{} is public", self.addr),
        }
    }
}

impl std::error::Error for Refusal {}

/// Judges `addr` under `policy`: `Ok(class)` when it may be connected (`Public`, or `Private`
/// with the opt-in), `Err` otherwise.
pub fn screen(addr: IpAddr, policy: SsrfPolicy) -> Result<AddressClass, Refusal> {
    let class = classify(addr);
    match class {
        AddressClass::Public => Ok(class),
        AddressClass::Private(_) if policy.allow_private_network => Ok(class),
        _ => Err(Refusal { addr, class }),
    }
}

/// Classifies an address (IPv6 transition forms unwrapped to the IPv4 they reach).
pub fn classify(addr: IpAddr) -> AddressClass {
    match addr {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// Cloud metadata services reached over IPv4 (AWS/GCP/Azure IMDS, AWS ECS task metadata,
/// Alibaba, Azure WireServer).
const METADATA_V4: [Ipv4Addr; 4] = [
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(169, 254, 170, 2),
    Ipv4Addr::new(100, 100, 100, 200),
    Ipv4Addr::new(168, 63, 129, 16),
];

/// AWS IMDS over IPv6.
const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254);

fn in_v4(addr: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    (u32::from(addr) & mask) == (u32::from(Ipv4Addr::from(net)) & mask)
}

fn classify_v4(a: Ipv4Addr) -> AddressClass {
    use AddressClass::{Forbidden, Private, Public};
    if METADATA_V4.contains(&a) {
        return Forbidden("cloud metadata endpoint");
    }
    const TABLE: &[([u8; 4], u32, AddressClass)] = &[
        (
            [0, 0, 0, 0],
            8,
            Forbidden("unspecified / \"this network\" 0.0.0.0/8"),
        ),
        ([127, 0, 0, 0], 8, Private("loopback 127.0.0.0/8")),
        ([10, 0, 0, 0], 8, Private("RFC 1918 10.0.0.0/8")),
        ([172, 16, 0, 0], 12, Private("RFC 1918 172.16.0.0/12")),
        ([192, 168, 0, 0], 16, Private("RFC 1918 192.168.0.0/16")),
        (
            [100, 64, 0, 0],
            10,
            Private("carrier-grade NAT 100.64.0.0/10"),
        ),
        ([169, 254, 0, 0], 16, Forbidden("link-local 169.254.0.0/16")),
        (
            [192, 0, 0, 0],
            24,
            Forbidden("IETF protocol assignments 192.0.0.0/24"),
        ),
        ([192, 0, 2, 0], 24, Forbidden("documentation 192.0.2.0/24")),
        (
            [198, 51, 100, 0],
            24,
            Forbidden("documentation 198.51.100.0/24"),
        ),
        (
            [203, 0, 113, 0],
            24,
            Forbidden("documentation 203.0.113.0/24"),
        ),
        ([198, 18, 0, 0], 15, Forbidden("benchmarking 198.18.0.0/15")),
        (
            [192, 88, 99, 0],
            24,
            Forbidden("deprecated 6to4 relay anycast 192.88.99.0/24"),
        ),
        ([224, 0, 0, 0], 4, Forbidden("multicast 224.0.0.0/4")),
        (
            [255, 255, 255, 255],
            32,
            Forbidden("broadcast 255.255.255.255"),
        ),
        ([240, 0, 0, 0], 4, Forbidden("reserved 240.0.0.0/4")),
    ];
    TABLE
        .iter()
        .find(|(net, prefix, _)| in_v4(a, *net, *prefix))
        .map_or(Public, |(_, _, class)| *class)
}

/// The IPv4 address an IPv6 transition form reaches, if `a` is one. For the local-use NAT64
/// prefix, whose embedding depends on an unknown prefix length, every RFC 6052 position is
/// returned and the strictest judgement wins.
fn embedded_v4(a: Ipv6Addr) -> Vec<Ipv4Addr> {
    let s = a.segments();
    let o = a.octets();
    let last32 = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    // IPv4-mapped ::ffff:0:0/96 and IPv4-translated ::ffff:0:0:0/96.
    if s[..5] == [0, 0, 0, 0, 0] && s[5] == 0xffff
        || s[..4] == [0, 0, 0, 0] && s[4] == 0xffff && s[5] == 0
    {
        return vec![last32];
    }
    // IPv4-compatible ::a.b.c.d (deprecated), except :: and ::1 which are judged as IPv6.
    if s[..6] == [0; 6] && u32::from(last32) > 1 {
        return vec![last32];
    }
    // NAT64 well-known prefix 64:ff9b::/96.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return vec![last32];
    }
    // Local-use NAT64 64:ff9b:1::/48 (RFC 8215): any RFC 6052 prefix length /48../96.
    if s[..3] == [0x64, 0xff9b, 0x0001] {
        return vec![
            Ipv4Addr::new(o[6], o[7], o[9], o[10]),   // /48
            Ipv4Addr::new(o[7], o[9], o[10], o[11]),  // /56
            Ipv4Addr::new(o[9], o[10], o[11], o[12]), // /64
            last32,                                   // /96
        ];
    }
    // 6to4 2002::/16: the IPv4 in bits 16..48.
    if s[0] == 0x2002 {
        return vec![Ipv4Addr::new(o[2], o[3], o[4], o[5])];
    }
    // Teredo 2001:0000::/32: the client IPv4 is the bitwise NOT of the last 32 bits.
    if s[0] == 0x2001 && s[1] == 0 {
        return vec![Ipv4Addr::from(!u32::from(last32))];
    }
    Vec::new()
}

fn in_v6(a: Ipv6Addr, net: Ipv6Addr, prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    (u128::from(a) & mask) == (u128::from(net) & mask)
}

/// Orders classes by strictness: forbidden > private > public.
fn stricter(a: AddressClass, b: AddressClass) -> AddressClass {
    let rank = |c: AddressClass| match c {
        AddressClass::Public => 0,
        AddressClass::Private(_) => 1,
        AddressClass::Forbidden(_) => 2,
    };
    if rank(b) > rank(a) { b } else { a }
}

fn classify_v6(a: Ipv6Addr) -> AddressClass {
    use AddressClass::{Forbidden, Private, Public};
    let embedded = embedded_v4(a);
    if !embedded.is_empty() {
        // Of several candidate embeddings (local-use NAT64), those in 0.0.0.0/8 are padding
        // of another prefix length, unless every candidate is.
        let meaningful: Vec<Ipv4Addr> = embedded
            .iter()
            .copied()
            .filter(|v4| v4.octets()[0] != 0)
            .collect();
        let candidates = if meaningful.is_empty() {
            embedded
        } else {
            meaningful
        };
        return candidates
            .into_iter()
            .map(classify_v4)
            .fold(Public, stricter);
    }
    if a == METADATA_V6 {
        return Forbidden("cloud metadata endpoint");
    }
    if a.is_unspecified() {
        return Forbidden("unspecified address ::");
    }
    if a.is_loopback() {
        return Private("loopback ::1");
    }
    let v6 = |s: [u16; 8]| Ipv6Addr::from(s);
    let table: [(Ipv6Addr, u32, AddressClass); 11] = [
        (
            v6([0xfe80, 0, 0, 0, 0, 0, 0, 0]),
            10,
            Forbidden("link-local fe80::/10"),
        ),
        (
            v6([0xfec0, 0, 0, 0, 0, 0, 0, 0]),
            10,
            Forbidden("deprecated site-local fec0::/10"),
        ),
        (
            v6([0xff00, 0, 0, 0, 0, 0, 0, 0]),
            8,
            Forbidden("multicast ff00::/8"),
        ),
        (
            v6([0xfc00, 0, 0, 0, 0, 0, 0, 0]),
            7,
            Private("unique local fc00::/7"),
        ),
        (
            v6([0x2001, 0x0db8, 0, 0, 0, 0, 0, 0]),
            32,
            Forbidden("documentation 2001:db8::/32"),
        ),
        (
            v6([0x3fff, 0, 0, 0, 0, 0, 0, 0]),
            20,
            Forbidden("documentation 3fff::/20"),
        ),
        (
            v6([0x0100, 0, 0, 0, 0, 0, 0, 0]),
            64,
            Forbidden("discard-only 100::/64"),
        ),
        (
            v6([0x2001, 0x0002, 0, 0, 0, 0, 0, 0]),
            48,
            Forbidden("benchmarking 2001:2::/48"),
        ),
        (
            v6([0x2001, 0x0010, 0, 0, 0, 0, 0, 0]),
            28,
            Forbidden("ORCHID 2001:10::/28"),
        ),
        (
            v6([0x2001, 0x0020, 0, 0, 0, 0, 0, 0]),
            28,
            Forbidden("ORCHIDv2 2001:20::/28"),
        ),
        (
            v6([0x5f00, 0, 0, 0, 0, 0, 0, 0]),
            16,
            Forbidden("SRv6 SIDs 5f00::/16"),
        ),
    ];
    if let Some((_, _, class)) = table
        .iter()
        .find(|(net, prefix, _)| in_v6(a, *net, *prefix))
    {
        return *class;
    }
    if !in_v6(a, v6([0x2000, 0, 0, 0, 0, 0, 0, 0]), 3) {
        return Forbidden("reserved IPv6 space outside 2000::/3");
    }
    Public
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> AddressClass {
        classify(s.parse().unwrap())
    }

    #[test]
    fn transition_forms_are_unwrapped() {
        assert!(matches!(c("::ffff:127.0.0.1"), AddressClass::Private(_)));
        assert!(matches!(
            c("::ffff:0:169.254.169.254"),
            AddressClass::Forbidden(_)
        ));
        assert!(matches!(c("::10.0.0.1"), AddressClass::Private(_)));
        assert!(matches!(
            c("64:ff9b::a9fe:a9fe"),
            AddressClass::Forbidden(_)
        ));
        assert!(matches!(c("64:ff9b::808:808"), AddressClass::Public));
        assert!(matches!(c("2002:7f00:1::"), AddressClass::Private(_)));
        // Teredo: client 127.0.0.1 = NOT 0x80fffffe.
        assert!(matches!(
            c("2001:0:4136:e378:8000:63bf:80ff:fffe"),
            AddressClass::Private(_)
        ));
        assert!(matches!(
            c("64:ff9b:1:a9fe:a9:fe00::"),
            AddressClass::Forbidden(_)
        ));
    }

    #[test]
    fn screen_applies_the_policy() {
        let open = SsrfPolicy {
            allow_private_network: true,
        };
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        assert!(screen(ip, SsrfPolicy::default()).is_err());
        assert!(screen(ip, open).is_ok());
        let meta: IpAddr = "169.254.169.254".parse().unwrap();
        let err = screen(meta, open).unwrap_err();
        assert!(err.to_string().contains("cloud metadata"), "{err}");
    }
}
