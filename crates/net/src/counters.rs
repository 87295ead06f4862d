//! Per-protocol frame and byte counts (like Wireshark's protocol hierarchy:
//! a frame counts once for every layer it contains).

use std::collections::HashMap;

/// Protocols with a fixed counter slot (the common, hot ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Proto {
    Ethernet,
    Vlan,
    LinuxSll,
    LinuxSll2,
    Null,
    RawIp,
    Pppoe,
    Mpls,
    Llc,
    Arp,
    Ipv4,
    Ipv6,
    IpFragment,
    Tcp,
    Udp,
    Icmp,
    Icmpv6,
    Igmp,
    Gre,
    Sctp,
    Esp,
    /// Frames whose IP or transport header was cut by the snaplen or
    /// malformed; they are still counted here, never dropped silently.
    MalformedIp,
    MalformedTcp,
    MalformedUdp,
    TruncatedLink,
}

const N_FIXED: usize = Proto::TruncatedLink as usize + 1;

impl Proto {
    pub fn name(self) -> &'static str {
        match self {
            Proto::Ethernet => "ethernet",
            Proto::Vlan => "vlan",
            Proto::LinuxSll => "linux-sll",
            Proto::LinuxSll2 => "linux-sll2",
            Proto::Null => "null",
            Proto::RawIp => "raw-ip",
            Proto::Pppoe => "pppoe",
            Proto::Mpls => "mpls",
            Proto::Llc => "llc",
            Proto::Arp => "arp",
            Proto::Ipv4 => "ipv4",
            Proto::Ipv6 => "ipv6",
            Proto::IpFragment => "ip-fragment",
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Icmp => "icmp",
            Proto::Icmpv6 => "icmpv6",
            Proto::Igmp => "igmp",
            Proto::Gre => "gre",
            Proto::Sctp => "sctp",
            Proto::Esp => "esp",
            Proto::MalformedIp => "malformed-ip",
            Proto::MalformedTcp => "malformed-tcp",
            Proto::MalformedUdp => "malformed-udp",
            Proto::TruncatedLink => "truncated-link-header",
        }
    }

    const ALL: [Proto; N_FIXED] = [
        Proto::Ethernet,
        Proto::Vlan,
        Proto::LinuxSll,
        Proto::LinuxSll2,
        Proto::Null,
        Proto::RawIp,
        Proto::Pppoe,
        Proto::Mpls,
        Proto::Llc,
        Proto::Arp,
        Proto::Ipv4,
        Proto::Ipv6,
        Proto::IpFragment,
        Proto::Tcp,
        Proto::Udp,
        Proto::Icmp,
        Proto::Icmpv6,
        Proto::Igmp,
        Proto::Gre,
        Proto::Sctp,
        Proto::Esp,
        Proto::MalformedIp,
        Proto::MalformedTcp,
        Proto::MalformedUdp,
        Proto::TruncatedLink,
    ];
}

/// Key of a protocol without a fixed slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum OtherKey {
    EtherType(u16),
    IpProto(u8),
    LinkType(u32),
}

impl OtherKey {
    fn name(self) -> String {
        match self {
            OtherKey::EtherType(t) => format!("ethertype-0x{t:04x}"),
            OtherKey::IpProto(p) => format!("ip-proto-{p}"),
            OtherKey::LinkType(l) => nastriage_capture::linktype::name(l),
        }
    }
}

#[derive(Debug, Default, Clone)]
pub struct ProtoCounters {
    fixed: [(u64, u64); N_FIXED],
    other: HashMap<OtherKey, (u64, u64)>,
}

impl ProtoCounters {
    #[inline]
    pub fn add(&mut self, p: Proto, wire_len: u64) {
        let slot = &mut self.fixed[p as usize];
        slot.0 += 1;
        slot.1 += wire_len;
    }

    pub(crate) fn add_other(&mut self, key: OtherKey, wire_len: u64) {
        let slot = self.other.entry(key).or_default();
        slot.0 += 1;
        slot.1 += wire_len;
    }

    /// Frames and bytes of one fixed protocol.
    pub fn get(&self, p: Proto) -> (u64, u64) {
        self.fixed[p as usize]
    }

    /// (name, frames, bytes) of every protocol seen, most frames first.
    pub fn summary(&self) -> Vec<(String, u64, u64)> {
        let mut v: Vec<(String, u64, u64)> = Proto::ALL
            .iter()
            .filter(|p| self.fixed[**p as usize].0 > 0)
            .map(|p| {
                (
                    p.name().to_string(),
                    self.fixed[*p as usize].0,
                    self.fixed[*p as usize].1,
                )
            })
            .chain(self.other.iter().map(|(k, (f, b))| (k.name(), *f, *b)))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    /// Link types the decoder does not know, with their frame counts.
    pub fn unsupported_linktypes(&self) -> Vec<(u32, u64)> {
        let mut v: Vec<(u32, u64)> = self
            .other
            .iter()
            .filter_map(|(k, (f, _))| match k {
                OtherKey::LinkType(l) => Some((*l, *f)),
                _ => None,
            })
            .collect();
        v.sort_unstable();
        v
    }

    /// Add another counter set (e.g. from a parallel worker).
    pub fn merge(&mut self, other: &ProtoCounters) {
        for (a, b) in self.fixed.iter_mut().zip(other.fixed.iter()) {
            a.0 += b.0;
            a.1 += b.1;
        }
        for (k, (f, b)) in &other.other {
            let slot = self.other.entry(*k).or_default();
            slot.0 += f;
            slot.1 += b;
        }
    }
}
