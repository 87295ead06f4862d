//! IPv4 and IPv6 (with extension headers) and the hand-off to fragment
//! reassembly and the transport decoder.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use etherparse::{Ipv4HeaderSlice, Ipv6ExtensionSlice, Ipv6ExtensionsSlice, Ipv6HeaderSlice};

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
        4 => ipv4(net.data, ts_ns, wire, c, defrag, out),
        _ => ipv6(net.data, ts_ns, wire, c, defrag, out),
    }
}

fn ipv4<'a>(
    data: &'a [u8],
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
    let total = if total == 0 { data.len() } else { total };
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
        let whole = defrag.add(key, ts_ns, frag_off, h.more_fragments(), payload, payload_wire);
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
    let plen = if plen == 0 { rest.len() } else { plen };
    let rest = &rest[..rest.len().min(plen)];
    let Ok((exts, proto, after)) = Ipv6ExtensionsSlice::from_slice(h.next_header(), rest) else {
        c.add(Proto::MalformedIp, wire);
        return;
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
    let frag = exts.clone().into_iter().find_map(|e| match e {
        Ipv6ExtensionSlice::Fragment(f) => Some(f),
        _ => None,
    });
    if let Some(f) = frag.filter(|f| f.is_fragmenting_payload()) {
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
            info.payload_len = d.len() as u32;
            info.reassembled = true;
            out.ip = Some(info);
            out.transport = transport::decode(info.proto, d, d.len() as u32, wire, c);
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
