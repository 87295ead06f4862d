//! Link layers, IP, TCP/UDP and the protocol counters.

mod common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use common::*;
use nastriage_capture::linktype;
use nastriage_net::{tcp_flags, Decoder, Proto, ProtoCounters, SackBlocks, TcpOptions};

fn udp_v4() -> Vec<u8> {
    ipv4(17, &udp(1111, 2049, b"hello"))
}

fn assert_udp_v4(o: &Out) {
    let ip = o.ip.expect("ip");
    assert_eq!(ip.version, 4);
    assert_eq!(ip.src, IpAddr::V4(Ipv4Addr::from(V4_A)));
    assert_eq!(ip.dst, IpAddr::V4(Ipv4Addr::from(V4_B)));
    assert_eq!(ip.proto, 17);
    assert_eq!(ip.payload_len, 13);
    assert_eq!(o.udp_payload(), (1111, 2049, 5, &b"hello"[..]));
}

// ------------------------------------------------------------ link layers

#[test]
fn ethernet_with_0_to_3_vlan_tags() {
    let mut d = Decoder::default();
    let cases: [&[(u16, u16)]; 6] = [
        &[],
        &[(0x8100, 10)],
        &[(0x88a8, 100), (0x8100, 10)],
        &[(0x9100, 7), (0x88a8, 100), (0x8100, 10)],
        &[(0x9200, 1)],
        &[(0x8100, 1), (0x8100, 2), (0x8100, 3)],
    ];
    for tags in cases {
        let f = eth_tagged(tags, 0x0800, &udp_v4());
        let o = decode(&mut d, linktype::ETHERNET, &f);
        assert_eq!(o.vlan_depth as usize, tags.len(), "{tags:?}");
        assert_udp_v4(&o);
    }
    // Frames with at least one tag are counted once as vlan.
    assert_eq!(d.counters().get(Proto::Vlan).0, 5);
    assert_eq!(d.counters().get(Proto::Ethernet).0, 6);
    assert_eq!(d.counters().get(Proto::Udp).0, 6);
    // IPv6 behind tags too.
    let f = eth_tagged(
        &[(0x88a8, 5), (0x8100, 6)],
        0x86dd,
        &ipv6(17, &udp(1, 2, b"x")),
    );
    let o = decode(&mut d, linktype::ETHERNET, &f);
    assert_eq!(o.vlan_depth, 2);
    assert_eq!(o.ip.unwrap().version, 6);
    // A tag cut short, and an absurd stack of tags.
    let mut cut = eth_tagged(&[(0x8100, 1)], 0x0800, &[]);
    cut.truncate(16);
    assert_eq!(decode(&mut d, linktype::ETHERNET, &cut).ip, None);
    let deep: Vec<(u16, u16)> = (0..40).map(|i| (0x8100, i)).collect();
    let o = decode(
        &mut d,
        linktype::ETHERNET,
        &eth_tagged(&deep, 0x0800, &udp_v4()),
    );
    assert_eq!(o.ip, None);
    assert_eq!(d.counters().get(Proto::TruncatedLink).0, 2);
}

fn pppoe(ppp_proto: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0x11, 0x00, 0x12, 0x34];
    v.extend_from_slice(&((payload.len() + 2) as u16).to_be_bytes());
    v.extend_from_slice(&ppp_proto.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

#[test]
fn pppoe_session() {
    let mut d = Decoder::default();
    let o = decode(
        &mut d,
        linktype::ETHERNET,
        &eth(0x8864, &pppoe(0x0021, &udp_v4())),
    );
    assert_udp_v4(&o);
    let v6 = ipv6(6, &Tcp::new(5, 6).build(b"abc"));
    let o = decode(
        &mut d,
        linktype::ETHERNET,
        &eth(0x8864, &pppoe(0x0057, &v6)),
    );
    assert_eq!(o.tcp().payload, b"abc");
    // PPPoE over QinQ.
    let f = eth_tagged(
        &[(0x88a8, 1), (0x8100, 2)],
        0x8864,
        &pppoe(0x0021, &udp_v4()),
    );
    let o = decode(&mut d, linktype::ETHERNET, &f);
    assert_eq!(o.vlan_depth, 2);
    assert_udp_v4(&o);
    // LCP is not IP: counted, not decoded.
    let o = decode(
        &mut d,
        linktype::ETHERNET,
        &eth(0x8864, &pppoe(0xc021, &[1, 2, 3, 4])),
    );
    assert_eq!(o.ip, None);
    assert_eq!(d.counters().get(Proto::Pppoe).0, 4);
    assert_eq!(count(&d, "ethertype-0x8864").0, 1);
    // Cut inside the PPPoE header.
    let o = decode(
        &mut d,
        linktype::ETHERNET,
        &eth(0x8864, &[0x11, 0, 0, 1, 0]),
    );
    assert_eq!(o.ip, None);
    assert_eq!(d.counters().get(Proto::TruncatedLink).0, 1);
}

fn mpls(labels: &[u32], payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    for (i, l) in labels.iter().enumerate() {
        let bottom = u32::from(i + 1 == labels.len());
        v.extend_from_slice(&((l << 12) | (bottom << 8) | 64).to_be_bytes());
    }
    v.extend_from_slice(payload);
    v
}

#[test]
fn mpls_label_stacks() {
    let mut d = Decoder::default();
    let o = decode(
        &mut d,
        linktype::ETHERNET,
        &eth(0x8847, &mpls(&[100], &udp_v4())),
    );
    assert_udp_v4(&o);
    let o = decode(
        &mut d,
        linktype::ETHERNET,
        &eth(0x8847, &mpls(&[1, 2, 3], &udp_v4())),
    );
    assert_udp_v4(&o);
    let o = decode(
        &mut d,
        linktype::ETHERNET,
        &eth(0x8848, &mpls(&[9], &ipv6(17, &udp(1, 2, b"")))),
    );
    assert_eq!(o.ip.unwrap().version, 6);
    // Behind a VLAN tag.
    let f = eth_tagged(&[(0x8100, 3)], 0x8847, &mpls(&[7, 8], &udp_v4()));
    assert_udp_v4(&decode(&mut d, linktype::ETHERNET, &f));
    // Ethernet pseudowire (not IP) and a stack with no bottom label.
    let o = decode(
        &mut d,
        linktype::ETHERNET,
        &eth(0x8847, &mpls(&[5], &eth(0x0800, &udp_v4()))),
    );
    assert_eq!(o.ip, None);
    let no_bottom: Vec<u8> = (0..20u32)
        .flat_map(|l| ((l << 12) | 64).to_be_bytes())
        .collect();
    assert_eq!(
        decode(&mut d, linktype::ETHERNET, &eth(0x8847, &no_bottom)).ip,
        None
    );
    assert_eq!(d.counters().get(Proto::Mpls).0, 6);
    assert_eq!(d.counters().get(Proto::TruncatedLink).0, 1);
}

#[test]
fn linux_sll_and_sll2() {
    let mut d = Decoder::default();
    // SLL built with etherparse's PacketBuilder.
    let builder = etherparse::PacketBuilder::linux_sll(
        etherparse::LinuxSllPacketType::OUTGOING,
        6,
        [1, 2, 3, 4, 5, 6, 0, 0],
    )
    .ipv4(V4_A, V4_B, 64)
    .udp(1111, 2049);
    let mut f = Vec::new();
    builder.write(&mut f, b"hello").unwrap();
    assert_udp_v4(&decode(&mut d, linktype::LINUX_SLL, &f));
    assert_eq!(d.counters().get(Proto::LinuxSll).0, 1);
    // SLL2: protocol, reserved, ifindex, hatype, pkttype, halen, address.
    let mut f = vec![0x08, 0x00, 0, 0, 0, 0, 0, 3, 0, 1, 4, 6];
    f.extend_from_slice(&[1, 2, 3, 4, 5, 6, 0, 0]);
    f.extend_from_slice(&udp_v4());
    assert_udp_v4(&decode(&mut d, linktype::LINUX_SLL2, &f));
    assert_eq!(d.counters().get(Proto::LinuxSll2).0, 1);
    // SLL carrying a tagged frame's payload type, and ARP.
    let mut sll = vec![0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x81, 0x00];
    sll.extend_from_slice(&[0, 5, 0x08, 0x00]);
    sll.extend_from_slice(&udp_v4());
    let o = decode(&mut d, linktype::LINUX_SLL, &sll);
    assert_eq!(o.vlan_depth, 1);
    assert_udp_v4(&o);
    let mut arp = vec![
        0x08, 0x06, 0, 0, 0, 0, 0, 3, 0, 1, 4, 6, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    arp.extend_from_slice(&[0; 28]);
    assert_eq!(decode(&mut d, linktype::LINUX_SLL2, &arp).ip, None);
    assert_eq!(d.counters().get(Proto::Arp).0, 1);
    // Cut headers.
    decode(&mut d, linktype::LINUX_SLL, &[0; 15]);
    decode(&mut d, linktype::LINUX_SLL2, &[0; 19]);
    assert_eq!(d.counters().get(Proto::TruncatedLink).0, 2);
}

#[test]
fn null_and_loop_both_byte_orders() {
    let mut d = Decoder::default();
    let v4 = udp_v4();
    let v6 = ipv6(17, &udp(7, 8, b"six"));
    for af in [2u32, 24, 28, 30, 10] {
        for be in [false, true] {
            let mut f = if be {
                af.to_be_bytes()
            } else {
                af.to_le_bytes()
            }
            .to_vec();
            f.extend_from_slice(if af == 2 { &v4 } else { &v6 });
            for lt in [linktype::NULL, linktype::LOOP] {
                let o = decode(&mut d, lt, &f);
                let ip = o.ip.unwrap_or_else(|| panic!("af {af} be {be}"));
                assert_eq!(ip.version, if af == 2 { 4 } else { 6 });
            }
        }
    }
    assert_eq!(d.counters().get(Proto::Null).0, 20);
    // A 16-bit family in the first two bytes, and Ethernet types in the
    // header (as Wireshark reads them).
    for (hdr, version) in [
        ([0u8, 2, 0, 0], 4u8),
        ([0x0f, 0, 8, 0], 4),
        ([0, 0, 0x86, 0xdd], 6),
    ] {
        let mut f = hdr.to_vec();
        f.extend_from_slice(if version == 4 { &v4 } else { &v6 });
        let o = decode(&mut d, linktype::NULL, &f);
        assert_eq!(o.ip.map(|ip| ip.version), Some(version), "{hdr:02x?}");
    }
    assert_eq!(d.counters().get(Proto::Null).0, 23);
    // An unknown address family is counted, and a cut header.
    let mut f = 17u32.to_le_bytes().to_vec();
    f.extend_from_slice(&[0; 20]);
    assert_eq!(decode(&mut d, linktype::NULL, &f).ip, None);
    decode(&mut d, linktype::NULL, &[2, 0]);
    assert_eq!(d.counters().get(Proto::TruncatedLink).0, 1);
    assert_eq!(d.counters().get(Proto::Null).0, 24);
    let unknown: u64 = d
        .counters()
        .summary()
        .iter()
        .filter(|(n, _, _)| n.contains("0x0011"))
        .map(|x| x.1)
        .sum();
    assert_eq!(unknown, 1);
}

#[test]
fn raw_ip_link_types() {
    let mut d = Decoder::default();
    let v6 = ipv6(6, &Tcp::new(80, 8080).build(b"get"));
    for lt in [
        linktype::RAW,
        linktype::RAW_BSD,
        linktype::RAW_OPENBSD,
        linktype::IPV4,
        linktype::IPV6,
    ] {
        assert_udp_v4(&decode(&mut d, lt, &udp_v4()));
        assert_eq!(decode(&mut d, lt, &v6).tcp().payload, b"get");
    }
    assert_eq!(d.counters().get(Proto::RawIp).0, 10);
    // Not IP at all, and empty.
    decode(&mut d, linktype::RAW, &[0x99, 1, 2, 3]);
    decode(&mut d, linktype::RAW, &[]);
    assert_eq!(d.counters().get(Proto::MalformedIp).0, 2);
}

#[test]
fn unknown_ethertypes_link_types_and_llc_counted_by_name() {
    let mut d = Decoder::default();
    decode(&mut d, linktype::ETHERNET, &eth(0x88cc, &[0; 30])); // LLDP
    decode(&mut d, linktype::ETHERNET, &eth(0x88cc, &[0; 30]));
    decode(&mut d, linktype::ETHERNET, &eth(0x0806, &[0; 28])); // ARP
    decode(&mut d, linktype::ETHERNET, &eth(0x0026, &[0x42; 38])); // 802.3 + LLC
    decode(&mut d, linktype::ETHERNET, &[0; 13]);
    decode_at(&mut d, 147, &[1, 2, 3], 300, 0);
    decode_at(&mut d, 253, &[1, 2, 3], 300, 0);
    assert_eq!(count(&d, "ethertype-0x88cc"), (2, 88));
    assert_eq!(count(&d, "arp").0, 1);
    assert_eq!(count(&d, "llc").0, 1);
    assert_eq!(count(&d, "truncated-link-header").0, 1);
    assert_eq!(count(&d, "linktype-147"), (1, 300));
    assert_eq!(count(&d, "netlink"), (1, 300));
    assert_eq!(
        d.counters().unsupported_linktypes(),
        vec![(147, 1), (253, 1)]
    );
}

// --------------------------------------------------------------------- IP

#[test]
fn ipv4_with_options() {
    let mut d = Decoder::default();
    let mut h = V4::new(17);
    // Record Route (7 bytes + 1 slot... padded), NOP, End of options.
    h.options = vec![7, 7, 4, 0, 0, 0, 0, 1, 0, 0, 0];
    h.options.resize(12, 0);
    h.ttl = 3;
    h.df = true;
    let p = h.build(&udp(53, 5353, b"dns?"));
    let o = decode(&mut d, linktype::RAW, &p);
    let ip = o.ip.unwrap();
    assert_eq!(
        (ip.ttl, ip.dont_fragment, ip.id, ip.payload_len),
        (3, true, 0x1234, 12)
    );
    assert_eq!(o.udp_payload(), (53, 5353, 4, &b"dns?"[..]));
    // Options cut by the snaplen: the IP header itself is incomplete.
    let o = decode_at(&mut d, linktype::RAW, &p[..28], p.len() as u32, 0);
    assert_eq!(o.ip, None);
    assert_eq!(d.counters().get(Proto::MalformedIp).0, 1);
    // IHL below 5, and total length below the header length.
    let mut bad = p.clone();
    bad[0] = 0x44;
    assert_eq!(decode(&mut d, linktype::RAW, &bad).ip, None);
    let mut h2 = V4::new(17);
    h2.total_len = Some(10);
    assert_eq!(
        decode(&mut d, linktype::RAW, &h2.build(&udp(1, 2, b""))).ip,
        None
    );
    assert_eq!(d.counters().get(Proto::MalformedIp).0, 3);
}

#[test]
fn ipv4_ethernet_padding_and_tso_total_length() {
    let mut d = Decoder::default();
    // 60-byte minimum frame: the padding is not UDP payload.
    let mut f = eth(0x0800, &ipv4(17, &udp(1, 2, b"ab")));
    f.resize(60, 0xee);
    let o = decode(&mut d, linktype::ETHERNET, &f);
    assert_eq!(o.udp_payload(), (1, 2, 2, &b"ab"[..]));
    assert_eq!(o.ip.unwrap().payload_len, 10);
    // Total length 0 (TSO capture on the sender): the captured length counts.
    let mut h = V4::new(6);
    h.total_len = Some(0);
    let seg = Tcp::new(1, 2).build(&[7; 3000]);
    let o = decode(&mut d, linktype::RAW, &h.build(&seg));
    assert_eq!(o.tcp().payload_len, 3000);
    assert_eq!(o.ip.unwrap().payload_len, 3020);
}

#[test]
fn ipv6_extension_headers() {
    let mut d = Decoder::default();
    let tcp = Tcp::new(2049, 800).build(b"nfs");
    // Hop-by-hop, destination options, routing, destination options, TCP.
    let mut rest = ext(60, &[5, 2, 0, 0]); // router alert in hop-by-hop
    rest.extend(ext(43, &[]));
    rest.extend(routing(60));
    rest.extend(ext(6, &[0x1e, 1, 0]));
    let ext_len = rest.len();
    rest.extend(&tcp);
    let p = ipv6(0, &rest);
    let o = decode(&mut d, linktype::RAW, &p);
    let ip = o.ip.unwrap();
    assert_eq!(ip.version, 6);
    assert_eq!(ip.proto, 6);
    assert_eq!(ip.src, IpAddr::V6(Ipv6Addr::from(V6_A)));
    assert_eq!(ip.ttl, 64);
    assert_eq!(ip.payload_len as usize, tcp.len());
    assert_eq!(ip.payload_len as usize, rest.len() - ext_len);
    let t = o.tcp();
    assert_eq!(
        (t.src_port, t.dst_port, t.payload.as_slice(), t.payload_len),
        (2049, 800, &b"nfs"[..], 3)
    );
    // Cut inside the extension headers by the snaplen.
    let o = decode_at(&mut d, linktype::RAW, &p[..40 + 20], p.len() as u32, 0);
    assert_eq!(o.ip, None);
    assert_eq!(d.counters().get(Proto::MalformedIp).0, 1);
    // No next header (59): IP only.
    let o = decode(&mut d, linktype::RAW, &ipv6(59, &[]));
    assert!(o.ip.is_some() && o.tp == Tp::None);
    // Payload length 0 (jumbogram/TSO): what was captured counts.
    let o = decode(
        &mut d,
        linktype::RAW,
        &ipv6_raw(17, &udp(3, 4, &[1; 100]), Some(0)),
    );
    assert_eq!(o.udp_payload().2, 100);
    // Ethernet padding after a short IPv6 packet is cut by the payload length.
    let mut f = eth(0x86dd, &ipv6(17, &udp(3, 4, b"")));
    f.extend_from_slice(&[0xee; 10]);
    let o = decode(&mut d, linktype::ETHERNET, &f);
    assert_eq!(o.udp_payload(), (3, 4, 0, &b""[..]));
    // An atomic fragment (offset 0, no more fragments) is no fragment.
    let mut rest = frag6(17, 0, false, 77);
    rest.extend(udp(5, 6, b"atomic"));
    let o = decode(&mut d, linktype::RAW, &ipv6(44, &rest));
    assert_eq!(o.udp_payload().3, b"atomic");
    assert_eq!(d.counters().get(Proto::IpFragment).0, 0);
}

// -------------------------------------------------------------- transport

fn syn_options() -> Vec<u8> {
    // MSS 1460, SACK permitted, timestamps, NOP, window scale 7 (Linux order).
    let mut o = vec![2, 4, 0x05, 0xb4, 4, 2, 8, 10];
    o.extend_from_slice(&0x0102_0304u32.to_be_bytes());
    o.extend_from_slice(&0u32.to_be_bytes());
    o.extend_from_slice(&[1, 3, 3, 7]);
    o
}

fn sack_option(blocks: &[(u32, u32)]) -> Vec<u8> {
    let mut o = vec![5, (2 + 8 * blocks.len()) as u8];
    for (l, r) in blocks {
        o.extend_from_slice(&l.to_be_bytes());
        o.extend_from_slice(&r.to_be_bytes());
    }
    o
}

fn ts_option(v: u32, e: u32) -> Vec<u8> {
    let mut o = vec![8, 10];
    o.extend_from_slice(&v.to_be_bytes());
    o.extend_from_slice(&e.to_be_bytes());
    o
}

fn tcp_with(options: Vec<u8>, flags: u16, payload: &[u8]) -> Out {
    let mut d = Decoder::default();
    let mut t = Tcp::new(40000, 445);
    t.options = options;
    t.flags = flags;
    decode(&mut d, linktype::RAW, &ipv4(6, &t.build(payload)))
}

#[test]
fn tcp_syn_options() {
    let o = tcp_with(
        syn_options(),
        tcp_flags::SYN | tcp_flags::ECE | tcp_flags::CWR,
        b"",
    );
    let t = o.tcp();
    assert_eq!(
        t.options,
        TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            sack: SackBlocks::default(),
            timestamp: Some((0x0102_0304, 0)),
            malformed: false,
        }
    );
    assert_eq!(t.header_len, 40);
    assert_eq!((t.seq, t.ack, t.window), (1000, 2000, 512));
    assert_eq!(t.flags, tcp_flags::SYN | tcp_flags::ECE | tcp_flags::CWR);
    // NS sits in the data-offset byte.
    let o = tcp_with(
        vec![],
        tcp_flags::NS | tcp_flags::ACK | tcp_flags::FIN | tcp_flags::URG,
        b"",
    );
    let t = o.tcp();
    assert!(t.flags & tcp_flags::NS != 0 && t.flags & tcp_flags::URG != 0);
    assert_eq!(t.flags, 0x131);
}

#[test]
fn tcp_sack_blocks_1_to_4() {
    let all = [(10u32, 20u32), (30, 40), (50, 60), (u32::MAX - 5, 3)];
    for n in 1..=4 {
        let mut opts = vec![1, 1];
        if n < 4 {
            opts.extend(ts_option(5, 6));
            opts.extend([1, 1]);
        }
        opts.extend(sack_option(&all[..n]));
        let o = tcp_with(opts, tcp_flags::ACK, b"data");
        let t = o.tcp();
        assert_eq!(t.options.sack.len as usize, n);
        assert_eq!(t.options.sack.as_slice(), &all[..n]);
        assert_eq!(t.options.timestamp, if n < 4 { Some((5, 6)) } else { None });
        assert!(!t.options.malformed);
        assert_eq!(t.payload, b"data");
    }
}

#[test]
fn tcp_unknown_option_kinds_are_skipped() {
    let mptcp = vec![30, 12, 0x20, 0x01, 1, 2, 3, 4, 5, 6, 7, 8];
    let md5 = {
        let mut v = vec![19, 18];
        v.extend_from_slice(&[0xab; 16]);
        v
    };
    let tfo = vec![34, 10, 1, 2, 3, 4, 5, 6, 7, 8];
    // After the known ones (MPTCP on a SYN).
    let mut opts = syn_options();
    opts.extend(&mptcp);
    let o = tcp_with(opts, tcp_flags::SYN, b"");
    assert_eq!(o.tcp().options.mss, Some(1460));
    assert_eq!(o.tcp().options.window_scale, Some(7));
    assert!(!o.tcp().options.malformed);
    // Before them: what follows is still read.
    let mut opts = mptcp.clone();
    opts.extend([1, 1]);
    opts.extend(ts_option(11, 12));
    opts.extend(sack_option(&[(100, 200)]));
    let o = tcp_with(opts, tcp_flags::ACK, b"");
    assert_eq!(o.tcp().options.timestamp, Some((11, 12)));
    assert_eq!(o.tcp().options.sack.as_slice(), &[(100, 200)]);
    assert!(!o.tcp().options.malformed);
    let mut opts = md5.clone();
    opts.extend(ts_option(1, 2));
    let o = tcp_with(opts, tcp_flags::ACK, b"");
    assert_eq!(o.tcp().options.timestamp, Some((1, 2)));
    let mut opts = tfo.clone();
    opts.extend([2, 4, 0x05, 0x78]);
    assert_eq!(
        tcp_with(opts, tcp_flags::SYN, b"").tcp().options.mss,
        Some(1400)
    );
}

#[test]
fn tcp_malformed_options() {
    // A length that cannot be: parsing stops, earlier options are kept.
    for bad in [vec![30, 0], vec![30, 1], vec![30, 40], vec![5, 3, 0]] {
        let mut opts = vec![2, 4, 0x05, 0xb4];
        opts.extend(bad.iter());
        opts.resize(opts.len().next_multiple_of(4), 1);
        opts.extend(ts_option(1, 1));
        let o = tcp_with(opts, tcp_flags::SYN, b"");
        let t = &o.tcp().options;
        assert_eq!(t.mss, Some(1460), "{bad:?}");
        assert!(t.malformed, "{bad:?}");
    }
    // A known kind of the wrong size is skipped; what follows is read.
    let mut opts = vec![2, 6, 0, 0, 0, 0, 3, 2];
    opts.extend(ts_option(9, 9));
    let o = tcp_with(opts, tcp_flags::SYN, b"");
    let t = &o.tcp().options;
    assert!(t.malformed && t.mss.is_none() && t.window_scale.is_none());
    assert_eq!(t.timestamp, Some((9, 9)));
    // SACK with a partial block.
    let o = tcp_with(
        vec![5, 14, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3],
        tcp_flags::ACK,
        b"",
    );
    assert!(o.tcp().options.malformed);
    assert_eq!(o.tcp().options.sack.len, 0);
    // End of options stops the walk; bytes after it are padding.
    let o = tcp_with(
        vec![2, 4, 1, 0, 0, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        tcp_flags::SYN,
        b"",
    );
    assert_eq!(o.tcp().options.mss, Some(256));
    assert_eq!(o.tcp().options.timestamp, None);
    assert!(!o.tcp().options.malformed);
}

#[test]
fn tcp_cut_by_snaplen() {
    let mut d = Decoder::default();
    let mut t = Tcp::new(1, 2);
    t.options = syn_options();
    let f = eth(0x0800, &ipv4(6, &t.build(&[0x55; 1000])));
    // Cut inside the payload: payload_len is from the IP header.
    let o = decode_at(
        &mut d,
        linktype::ETHERNET,
        &f[..14 + 20 + 40 + 100],
        f.len() as u32,
        0,
    );
    let seg = o.tcp();
    assert_eq!(seg.payload_len, 1000);
    assert_eq!(seg.payload.len(), 100);
    assert_eq!(seg.options.timestamp, Some((0x0102_0304, 0)));
    assert_eq!(o.ip.unwrap().payload_len, 1040);
    // Cut inside the TCP header (options included): counted as malformed-tcp.
    for cut in [14 + 20, 14 + 20 + 10, 14 + 20 + 39] {
        let o = decode_at(&mut d, linktype::ETHERNET, &f[..cut], f.len() as u32, 0);
        assert!(o.ip.is_some());
        assert_eq!(o.tp, Tp::None, "cut {cut}");
    }
    assert_eq!(
        d.counters().get(Proto::MalformedTcp),
        (3, 3 * f.len() as u64)
    );
    assert_eq!(d.counters().get(Proto::Tcp).0, 1);
    // IP total length shorter than the TCP header: malformed too.
    let mut h = V4::new(6);
    h.total_len = Some(30);
    decode(&mut d, linktype::RAW, &h.build(&Tcp::new(1, 2).build(b"")));
    assert_eq!(d.counters().get(Proto::MalformedTcp).0, 4);
}

#[test]
fn udp_lengths() {
    let mut d = Decoder::default();
    // Length field 0: the IP length is trusted.
    let o = decode(&mut d, linktype::RAW, &ipv4(17, &udp_len(1, 2, b"zero", 0)));
    assert_eq!(o.udp_payload(), (1, 2, 4, &b"zero"[..]));
    // Length field larger than the IP payload: IP wins.
    let o = decode(
        &mut d,
        linktype::RAW,
        &ipv4(17, &udp_len(1, 2, b"big", 500)),
    );
    assert_eq!(o.udp_payload().2, 3);
    // Length field shorter than the IP payload (trailing bytes).
    let o = decode(
        &mut d,
        linktype::RAW,
        &ipv4(17, &udp_len(1, 2, b"shortXXXX", 13)),
    );
    assert_eq!(o.udp_payload(), (1, 2, 5, &b"short"[..]));
    // Snaplen cut inside the payload.
    let p = ipv4(17, &udp(1, 2, &[9; 1400]));
    let o = decode_at(&mut d, linktype::RAW, &p[..100], p.len() as u32, 0);
    let (_, _, len, payload) = o.udp_payload();
    assert_eq!((len, payload.len()), (1400, 72));
    // Header cut.
    let o = decode_at(&mut d, linktype::RAW, &p[..24], p.len() as u32, 0);
    assert_eq!(o.tp, Tp::None);
    assert_eq!(d.counters().get(Proto::MalformedUdp).0, 1);
    assert_eq!(d.counters().get(Proto::Udp).0, 4);
}

#[test]
fn other_ip_protocols_counted() {
    let mut d = Decoder::default();
    for (proto, name) in [
        (1u8, "icmp"),
        (2, "igmp"),
        (47, "gre"),
        (50, "esp"),
        (132, "sctp"),
        (253, "ip-proto-253"),
    ] {
        let o = decode(
            &mut d,
            linktype::RAW,
            &ipv4(proto, &[8, 0, 0, 0, 0, 0, 0, 0]),
        );
        assert_eq!(o.tp, Tp::Other(proto));
        assert_eq!(count(&d, name).0, 1, "{name}");
    }
    let o = decode(
        &mut d,
        linktype::RAW,
        &ipv6(58, &[128, 0, 0, 0, 0, 1, 0, 1]),
    );
    assert_eq!(o.tp, Tp::Other(58));
    assert_eq!(d.counters().get(Proto::Icmpv6).0, 1);
    assert_eq!(d.counters().get(Proto::Ipv4).0, 6);
    assert_eq!(d.counters().get(Proto::Ipv6).0, 1);
}

#[test]
fn counters_summary_and_merge() {
    let mut d = Decoder::default();
    decode_at(&mut d, linktype::ETHERNET, &eth(0x0800, &udp_v4()), 1000, 0);
    decode_at(&mut d, linktype::ETHERNET, &eth(0x0800, &udp_v4()), 1000, 0);
    decode_at(&mut d, linktype::ETHERNET, &eth(0x88cc, &[0; 10]), 64, 0);
    let s = d.counters().summary();
    // Most frames first, then by name; bytes are wire lengths.
    assert_eq!(
        s,
        vec![
            ("ethernet".to_string(), 3, 2064),
            ("ipv4".to_string(), 2, 2000),
            ("udp".to_string(), 2, 2000),
            ("ethertype-0x88cc".to_string(), 1, 64),
        ]
    );
    let mut total = ProtoCounters::default();
    total.merge(d.counters());
    total.merge(d.counters());
    assert_eq!(total.get(Proto::Ethernet), (6, 4128));
    assert_eq!(
        total.summary().last().unwrap(),
        &("ethertype-0x88cc".to_string(), 2, 128)
    );
    assert_eq!(Proto::TruncatedLink.name(), "truncated-link-header");
}

#[test]
fn random_frames_never_panic() {
    let mut rng = XorShift(0xDEAD_BEEF_CAFE_F00D);
    let mut d = Decoder::new(nastriage_net::DefragLimits {
        max_pending: 8,
        max_bytes: 64 << 10,
        timeout_ns: 1_000,
    });
    let lts = [0u32, 1, 12, 14, 101, 108, 113, 228, 229, 276, 147];
    let seeds = [
        eth(0x0800, &ipv4(6, &Tcp::new(1, 2).build(b"x"))),
        eth_tagged(&[(0x8100, 1)], 0x86dd, &ipv6(44, &frag6(17, 8, true, 3))),
        ipv4(17, &udp(1, 2, b"abc")),
        ipv6(0, &ext(6, &[])),
    ];
    for i in 0..20_000 {
        let mut f = if i % 2 == 0 {
            (0..rng.below(120))
                .map(|_| rng.next_u64() as u8)
                .collect::<Vec<u8>>()
        } else {
            let mut f = seeds[rng.below(seeds.len())].clone();
            for _ in 0..1 + rng.below(4) {
                let k = rng.below(f.len());
                f[k] = rng.next_u64() as u8;
            }
            f
        };
        if rng.below(4) == 0 {
            let n = rng.below(f.len() + 1);
            f.truncate(n);
        }
        let lt = lts[rng.below(lts.len())];
        let orig = f.len() as u32 + rng.below(3) as u32;
        decode_at(&mut d, lt, &f, orig, i);
    }
    assert!(d.counters().summary().iter().map(|x| x.1).sum::<u64>() > 0);
}
