//! LINKTYPE_* values (tcpdump.org link-layer header types) that the decoder knows.

pub const NULL: u32 = 0;
pub const ETHERNET: u32 = 1;
pub const FDDI: u32 = 10;
/// DLT_RAW as written by some BSDs (12) and OpenBSD (14); both are raw IP.
pub const RAW_BSD: u32 = 12;
pub const RAW_OPENBSD: u32 = 14;
pub const RAW: u32 = 101;
pub const LOOP: u32 = 108;
pub const LINUX_SLL: u32 = 113;
pub const IPV4: u32 = 228;
pub const IPV6: u32 = 229;
pub const LINUX_SLL2: u32 = 276;

/// A short name for a link type, for reports.
pub fn name(linktype: u32) -> String {
    match linktype {
        NULL => "null".into(),
        ETHERNET => "ethernet".into(),
        FDDI => "fddi".into(),
        RAW_BSD | RAW_OPENBSD | RAW => "raw-ip".into(),
        LOOP => "loop".into(),
        LINUX_SLL => "linux-sll".into(),
        IPV4 => "ipv4".into(),
        IPV6 => "ipv6".into(),
        LINUX_SLL2 => "linux-sll2".into(),
        253 => "netlink".into(),
        other => format!("linktype-{other}"),
    }
}
