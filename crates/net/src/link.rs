//! Link layers down to the IP header.

use nastriage_capture::linktype;

use crate::counters::{OtherKey, Proto, ProtoCounters};

/// An IP packet found inside a frame: version and the bytes from its header.
pub(crate) struct NetSlice<'a> {
    pub(crate) version: u8,
    pub(crate) data: &'a [u8],
    /// Bytes the IP packet can occupy on the wire: what the frame's wire
    /// length leaves after the link headers, further bounded by a link
    /// length field (PPPoE). Like Wireshark, an IP length claiming more is
    /// cut to this.
    pub(crate) wire_avail: u64,
}

const ETH_IPV4: u16 = 0x0800;
const ETH_ARP: u16 = 0x0806;
const ETH_IPV6: u16 = 0x86DD;
const ETH_VLAN: u16 = 0x8100;
const ETH_QINQ: u16 = 0x88A8;
const ETH_QINQ_OLD1: u16 = 0x9100;
const ETH_QINQ_OLD2: u16 = 0x9200;
const ETH_PPPOE_SESSION: u16 = 0x8864;
const ETH_MPLS: u16 = 0x8847;
const ETH_MPLS_MC: u16 = 0x8848;

/// Bound on stacked tags/labels so a crafted frame cannot loop long.
const MAX_STACK: u8 = 16;

pub(crate) fn strip<'a>(
    lt: u32,
    data: &'a [u8],
    wire: u64,
    c: &mut ProtoCounters,
    vlan_depth: &mut u8,
) -> Option<NetSlice<'a>> {
    match lt {
        linktype::ETHERNET => {
            if data.len() < 14 {
                c.add(Proto::TruncatedLink, wire);
                return None;
            }
            c.add(Proto::Ethernet, wire);
            let ethertype = u16::from_be_bytes([data[12], data[13]]);
            if ethertype <= 1500 {
                // IEEE 802.3 length field: LLC/SNAP (STP, CDP, ...).
                c.add(Proto::Llc, wire);
                return None;
            }
            ethertype_payload(ethertype, &data[14..], wire, c, vlan_depth)
        }
        linktype::LINUX_SLL => {
            if data.len() < 16 {
                c.add(Proto::TruncatedLink, wire);
                return None;
            }
            c.add(Proto::LinuxSll, wire);
            let proto = u16::from_be_bytes([data[14], data[15]]);
            ethertype_payload(proto, &data[16..], wire, c, vlan_depth)
        }
        linktype::LINUX_SLL2 => {
            if data.len() < 20 {
                c.add(Proto::TruncatedLink, wire);
                return None;
            }
            c.add(Proto::LinuxSll2, wire);
            let proto = u16::from_be_bytes([data[0], data[1]]);
            ethertype_payload(proto, &data[20..], wire, c, vlan_depth)
        }
        linktype::NULL | linktype::LOOP => {
            if data.len() < 4 {
                c.add(Proto::TruncatedLink, wire);
                return None;
            }
            c.add(Proto::Null, wire);
            let af = null_family([data[0], data[1], data[2], data[3]]);
            if af > 1500 {
                // Some systems put an Ethernet type there (as Wireshark
                // accepts).
                return ethertype_payload(af as u16, &data[4..], wire, c, vlan_depth);
            }
            match af {
                2 => ip_payload(4, &data[4..], wire, c),
                10 | 24 | 28 | 30 => ip_payload(6, &data[4..], wire, c),
                other => {
                    c.add_other(OtherKey::EtherType(other as u16), wire);
                    None
                }
            }
        }
        linktype::RAW
        | linktype::RAW_BSD
        | linktype::RAW_OPENBSD
        | linktype::IPV4
        | linktype::IPV6 => {
            c.add(Proto::RawIp, wire);
            match data.first().map(|b| b >> 4) {
                Some(4) => ip_payload(4, data, wire, c),
                Some(6) => ip_payload(6, data, wire, c),
                _ => {
                    c.add(Proto::MalformedIp, wire);
                    None
                }
            }
        }
        other => {
            c.add_other(OtherKey::LinkType(other), wire);
            None
        }
    }
}

/// The NULL/LOOP header value, as Wireshark reads it: NULL is in the
/// capturing host's byte order and LOOP in network order, some systems put
/// a 16-bit family in the first two bytes, and values above 1500 are
/// Ethernet types.
fn null_family(b: [u8; 4]) -> u32 {
    let mut h = u32::from_le_bytes(b);
    if h & 0xFFFF_0000 != 0 {
        if h & 0xFF00_0000 == 0 && h & 0x00FF_0000 < 0x0006_0000 {
            h >>= 16;
        } else {
            h = h.swap_bytes();
        }
    } else if h & 0xFF == 0 && h & 0xFF00 < 0x0600 {
        h = u32::from((h as u16).swap_bytes());
    }
    h
}

fn ip_payload<'a>(
    version: u8,
    data: &'a [u8],
    _wire: u64,
    _c: &mut ProtoCounters,
) -> Option<NetSlice<'a>> {
    Some(NetSlice {
        version,
        data,
        wire_avail: u64::MAX,
    })
}

fn ethertype_payload<'a>(
    mut ethertype: u16,
    mut data: &'a [u8],
    wire: u64,
    c: &mut ProtoCounters,
    vlan_depth: &mut u8,
) -> Option<NetSlice<'a>> {
    // PPPoE's length field bounds the IP packet it carries.
    let mut pppoe_avail = u64::MAX;
    let bounded = |n: Option<NetSlice<'a>>, avail: u64| {
        n.map(|n| NetSlice {
            wire_avail: n.wire_avail.min(avail),
            ..n
        })
    };
    loop {
        match ethertype {
            ETH_IPV4 => return bounded(ip_payload(4, data, wire, c), pppoe_avail),
            ETH_IPV6 => return bounded(ip_payload(6, data, wire, c), pppoe_avail),
            ETH_ARP => {
                c.add(Proto::Arp, wire);
                return None;
            }
            ETH_VLAN | ETH_QINQ | ETH_QINQ_OLD1 | ETH_QINQ_OLD2 => {
                if data.len() < 4 || *vlan_depth >= MAX_STACK {
                    c.add(Proto::TruncatedLink, wire);
                    return None;
                }
                if *vlan_depth == 0 {
                    c.add(Proto::Vlan, wire);
                }
                *vlan_depth += 1;
                ethertype = u16::from_be_bytes([data[2], data[3]]);
                data = &data[4..];
            }
            ETH_PPPOE_SESSION => {
                // 6-byte PPPoE header, then the 2-byte PPP protocol.
                if data.len() < 8 {
                    c.add(Proto::TruncatedLink, wire);
                    return None;
                }
                c.add(Proto::Pppoe, wire);
                let ppp = u16::from_be_bytes([data[6], data[7]]);
                // The length covers the PPP protocol field and its payload.
                pppoe_avail = u64::from(u16::from_be_bytes([data[4], data[5]])).saturating_sub(2);
                ethertype = match ppp {
                    0x0021 => ETH_IPV4,
                    0x0057 => ETH_IPV6,
                    other => {
                        c.add_other(OtherKey::EtherType(0x8864), wire);
                        let _ = other;
                        return None;
                    }
                };
                data = &data[8..];
            }
            ETH_MPLS | ETH_MPLS_MC => {
                c.add(Proto::Mpls, wire);
                let mut depth = 0u8;
                loop {
                    if data.len() < 4 || depth >= MAX_STACK {
                        c.add(Proto::TruncatedLink, wire);
                        return None;
                    }
                    let bottom = data[2] & 0x01 != 0;
                    data = &data[4..];
                    depth += 1;
                    if bottom {
                        break;
                    }
                }
                // The payload type is not signalled; IP is recognised by its
                // version nibble (pseudowires carrying Ethernet are not).
                return match data.first().map(|b| b >> 4) {
                    Some(4) => ip_payload(4, data, wire, c),
                    Some(6) => ip_payload(6, data, wire, c),
                    _ => None,
                };
            }
            other => {
                c.add_other(OtherKey::EtherType(other), wire);
                return None;
            }
        }
    }
}
