//! IPv4 and IPv6 (with extension headers) and the hand-off to fragment
//! reassembly and the transport decoder.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use etherparse::{Ipv4HeaderSlice, Ipv6ExtensionsSlice, Ipv6FragmentHeaderSlice, Ipv6HeaderSlice};

use crate::counters::{Proto, ProtoCounters};
use crate::defrag::{Defragmenter, FragKey};
use crate::link::NetSlice;
use crate::{transport, Decoded, IpInfo, Transport};

pub(crate) fn decode<'a>(
    net: NetSlice<'a>,
    ts_ns: i64,
    wire: u64,
    c: &mut ProtoCounters,
    defrag: &'a mut Defragmenter,
    out: &mut Decoded<'a>,
) {
    match net.version {
        4 => ipv4(net.data, net.wire_avail, ts_ns, wire, c, defrag, out),
        _ => ipv6(net.data, net.wire_avail, ts_ns, wire, c, defrag, out),
    }
}

fn ipv4<'a>(
    data: &'a [u8],
    wire_avail: u64,
    ts_ns: i64,
    wire: u64,
    c: &mut ProtoCounters,
    defrag: &'a mut Defragmenter,
    out: &mut Decoded<'a>,
) {
    let Ok(h) = Ipv4HeaderSlice::from_slice(data) else {
        c.add(Proto::MalformedIp, wire);
        return;
    };
    c.add(Proto::Ipv4, wire);
    let hlen = h.slice().len();
    let total = h.total_len() as usize;
    // Total length 0 is what TSO/GSO frames captured on the sending host
    // carry; the captured length is then the best measure.
    let avail = usize::try_from(wire_avail).unwrap_or(usize::MAX);
    let total = if total == 0 { avail } else { total.min(avail) };
    if total < hlen {
        c.add(Proto::MalformedIp, wire);
        return;
    }
    let payload_wire = (total - hlen) as u32;
    let payload = &data[hlen..data.len().min(total)];
    let mut info = IpInfo {
        version: 4,
        src: IpAddr::V4(Ipv4Addr::from(h.source())),
        dst: IpAddr::V4(Ipv4Addr::from(h.destination())),
        ttl: h.ttl(),
        id: u32::from(h.identification()),
        proto: h.protocol().0,
        payload_len: payload_wire,
        dont_fragment: h.dont_fragment(),
        reassembled: false,
    };
    let frag_off = u32::from(h.fragments_offset().value()) * 8;
    if h.more_fragments() || frag_off > 0 {
        c.add(Proto::IpFragment, wire);
        let key = FragKey {
            version: 4,
            src: info.src,
            dst: info.dst,
            id: info.id,
            proto: info.proto,
        };
        let whole = defrag.add(
            key,
            ts_ns,
            frag_off,
            h.more_fragments(),
            payload,
            payload_wire,
        );
        out.ip = Some(info);
        if let Some(d) = whole {
            info.payload_len = d.len() as u32;
            info.reassembled = true;
            out.ip = Some(info);
            out.transport = transport::decode(info.proto, d, d.len() as u32, wire, c);
        }
        return;
    }
    out.ip = Some(info);
    out.transport = transport::decode(info.proto, payload, payload_wire, wire, c);
}

fn ipv6<'a>(
    data: &'a [u8],
    wire_avail: u64,
    ts_ns: i64,
    wire: u64,
    c: &mut ProtoCounters,
    defrag: &'a mut Defragmenter,
    out: &mut Decoded<'a>,
) {
    let Ok(h) = Ipv6HeaderSlice::from_slice(data) else {
        c.add(Proto::MalformedIp, wire);
        return;
    };
    c.add(Proto::Ipv6, wire);
    let plen = h.payload_length() as usize;
    let rest = &data[40..];
    // Payload length 0: jumbogram or TSO; use what was captured.
    let avail = usize::try_from(wire_avail.saturating_sub(40)).unwrap_or(usize::MAX);
    let plen = if plen == 0 { avail } else { plen.min(avail) };
    let rest = &rest[..rest.len().min(plen)];
    // A fragmenting Fragment header ends the unfragmentable part: in later
    // fragments what follows it is data (not headers), and in the first one
    // any headers after it belong to the reassembled payload, whose offsets
    // count from right after the Fragment header.
    let frag = fragment_header(h.next_header().0, rest);
    let (proto, after) = match &frag {
        Some((end, f)) => (f.next_header(), &rest[*end..]),
        None => match Ipv6ExtensionsSlice::from_slice(h.next_header(), rest) {
            Ok((_, proto, after)) => (proto, after),
            Err(_) => {
                c.add(Proto::MalformedIp, wire);
                return;
            }
        },
    };
    let ext_len = rest.len() - after.len();
    let payload_wire = plen.saturating_sub(ext_len) as u32;
    let mut info = IpInfo {
        version: 6,
        src: IpAddr::V6(Ipv6Addr::from(h.source())),
        dst: IpAddr::V6(Ipv6Addr::from(h.destination())),
        ttl: h.hop_limit(),
        id: 0,
        proto: proto.0,
        payload_len: payload_wire,
        dont_fragment: false,
        reassembled: false,
    };
    if let Some((_, f)) = frag {
        c.add(Proto::IpFragment, wire);
        info.id = f.identification();
        let key = FragKey {
            version: 6,
            src: info.src,
            dst: info.dst,
            id: info.id,
            proto: info.proto,
        };
        let off = u32::from(f.fragment_offset().value()) * 8;
        let whole = defrag.add(key, ts_ns, off, f.more_fragments(), after, payload_wire);
        out.ip = Some(info);
        if let Some(d) = whole {
            // Extension headers after the Fragment header (destination
            // options, ...) begin the reassembled payload.
            let Ok((_, inner, d)) = Ipv6ExtensionsSlice::from_slice(proto, d) else {
                c.add(Proto::MalformedIp, wire);
                return;
            };
            info.proto = inner.0;
            info.payload_len = d.len() as u32;
            info.reassembled = true;
            out.ip = Some(info);
            if inner.0 != 59 {
                out.transport = transport::decode(info.proto, d, d.len() as u32, wire, c);
            }
        }
        return;
    }
    out.ip = Some(info);
    out.transport = if matches!(proto.0, 59) {
        // No next header.
        Transport::None
    } else {
        transport::decode(info.proto, after, payload_wire, wire, c)
    };
}

/// The first Fragment header that fragments the payload, behind the
/// extension headers that precede it, with the offset just past it. `None`
/// when there is none, or when the headers before it are cut or malformed.
fn fragment_header(first: u8, rest: &[u8]) -> Option<(usize, Ipv6FragmentHeaderSlice<'_>)> {
    let (mut next, mut at) = (first, 0usize);
    loop {
        let len = match next {
            // Hop-by-hop, routing, destination options: 8-octet units.
            0 | 43 | 60 => (usize::from(*rest.get(at + 1)?) + 1) * 8,
            // Authentication header: 4-octet units.
            51 => (usize::from(*rest.get(at + 1)?) + 2) * 4,
            44 => {
                let f = Ipv6FragmentHeaderSlice::from_slice(rest.get(at..)?).ok()?;
                if f.is_fragmenting_payload() {
                    return Some((at + 8, f));
                }
                8
            }
            _ => return None,
        };
        next = *rest.get(at)?;
        at += len;
        if at > rest.len() {
            return None;
        }
    }
}
