//! Where on the path the capture was taken.
//!
//! Evidence, strongest first:
//!
//! 1. The RTT split. The handshake's SYN → SYN/ACK is the server side of
//!    the capture point, SYN/ACK → ACK the client side (see `rtt.rs`); near
//!    the client the first is about the whole RTT and the second about 0.
//!    Without the handshake, the smallest data → ACK (or timestamp) time of
//!    each side is used. A side with at most 15 % of the RTT is the near
//!    side; otherwise the capture was taken mid-path.
//! 2. TTLs. Hosts start at 64, 128 or 255; the smallest of these not below
//!    the largest TTL seen from a side, minus that TTL, is the number of
//!    routers between that side and the capture point. 0 hops from one side
//!    and more from the other: captured on (or next to) the 0-hop host.
//!    Used alone when there is no RTT split, and to settle a mid-path split
//!    that leans the same way.
//! 3. Segments larger than the MSS (TSO/GSO on a sender, GRO/LRO on a
//!    receiver) show the capture ran on an end host; they do not say which,
//!    so they are only reported.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    NearClient,
    NearServer,
    MidPath,
    Unknown,
}

impl Point {
    pub fn name(self) -> &'static str {
        match self {
            Point::NearClient => "near_client",
            Point::NearServer => "near_server",
            Point::MidPath => "mid_path",
            Point::Unknown => "unknown",
        }
    }
}

/// Share of the RTT at or below which a side counts as "near".
pub const NEAR_SHARE: f64 = 0.15;

#[derive(Debug, Clone, Copy, Default)]
pub struct Evidence {
    /// Handshake: SYN/ACK → ACK and SYN → SYN/ACK.
    pub hs_client_ns: Option<i64>,
    pub hs_server_ns: Option<i64>,
    /// Smallest data/timestamp sample of each side.
    pub data_client_ns: Option<i64>,
    pub data_server_ns: Option<i64>,
    /// Largest TTL (hop limit) seen from each side.
    pub ttl_client: Option<u8>,
    pub ttl_server: Option<u8>,
    /// Segments larger than the MSS sent by each side.
    pub large_from_client: u64,
    pub large_from_server: u64,
}

/// Routers between a host and the capture point, from an observed TTL.
pub fn hops(ttl: u8) -> u8 {
    let initial = if ttl <= 64 {
        64
    } else if ttl <= 128 {
        128
    } else {
        255
    };
    initial - ttl
}

fn ms(ns: i64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

pub fn decide(e: &Evidence) -> (Point, String) {
    let mut why: Vec<String> = Vec::new();
    // 1. RTT split.
    let split = match (e.hs_client_ns, e.hs_server_ns) {
        (Some(c), Some(s)) if c + s > 0 => Some((c, s, "handshake: SYN/ACK→ACK", "SYN→SYN/ACK")),
        _ => match (e.data_client_ns, e.data_server_ns) {
            (Some(c), Some(s)) if c + s > 0 => {
                Some((c, s, "smallest data→ACK: client side", "server side"))
            }
            _ => None,
        },
    };
    let mut rtt_point = None;
    let mut client_share = 0.5;
    if let Some((c, s, cname, sname)) = split {
        client_share = c as f64 / (c + s) as f64;
        let p = if client_share <= NEAR_SHARE {
            Point::NearClient
        } else if client_share >= 1.0 - NEAR_SHARE {
            Point::NearServer
        } else {
            Point::MidPath
        };
        why.push(format!(
            "{cname} {}, {sname} {} ({:.0}% of the RTT on the client side)",
            ms(c),
            ms(s),
            client_share * 100.0
        ));
        rtt_point = Some(p);
    }
    // 2. TTLs.
    let hc = e.ttl_client.map(hops);
    let hs = e.ttl_server.map(hops);
    let ttl_point = match (hc, hs) {
        (Some(0), Some(s)) if s > 0 => Some(Point::NearClient),
        (Some(c), Some(0)) if c > 0 => Some(Point::NearServer),
        _ => None,
    };
    if let (Some(c), Some(s)) = (hc, hs) {
        let what = match ttl_point {
            Some(Point::NearClient) => " (captured on the client's segment or host)",
            Some(Point::NearServer) => " (captured on the server's segment or host)",
            _ if c == 0 && s == 0 => " (no router between the hosts and the capture point)",
            _ => "",
        };
        why.push(format!(
            "TTL {} from the client ({c} hop(s)), {} from the server ({s} hop(s)){what}",
            e.ttl_client.unwrap_or(0),
            e.ttl_server.unwrap_or(0)
        ));
    }
    // 3. TSO/GRO.
    if e.large_from_client + e.large_from_server > 0 {
        why.push(format!(
            "segments larger than the MSS ({} from the client, {} from the server): TSO/GRO, so captured on an end host",
            e.large_from_client, e.large_from_server
        ));
    }
    let point = match (rtt_point, ttl_point) {
        (Some(Point::MidPath), Some(Point::NearClient)) if client_share < 0.5 => Point::NearClient,
        (Some(Point::MidPath), Some(Point::NearServer)) if client_share > 0.5 => Point::NearServer,
        (Some(p), _) => p,
        (None, Some(p)) => p,
        (None, None) => Point::Unknown,
    };
    if let (Some(r), Some(t)) = (rtt_point, ttl_point) {
        if r != t && r != Point::MidPath {
            why.push("TTLs disagree with the RTT split; the RTT split wins".into());
        }
    }
    if why.is_empty() {
        why.push("no handshake, RTT samples or TTLs to go by".into());
    }
    (point, why.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    #[test]
    fn hop_counts() {
        assert_eq!(hops(64), 0);
        assert_eq!(hops(63), 1);
        assert_eq!(hops(128), 0);
        assert_eq!(hops(120), 8);
        assert_eq!(hops(255), 0);
        assert_eq!(hops(250), 5);
        assert_eq!(hops(1), 63);
    }

    #[test]
    fn handshake_split_decides() {
        let e = Evidence {
            hs_client_ns: Some(20_000),
            hs_server_ns: Some(10 * MS),
            ..Default::default()
        };
        let (p, why) = decide(&e);
        assert_eq!(p, Point::NearClient);
        assert!(why.contains("handshake"), "{why}");
        let e = Evidence {
            hs_client_ns: Some(10 * MS),
            hs_server_ns: Some(30_000),
            ..e
        };
        assert_eq!(decide(&e).0, Point::NearServer);
        let e = Evidence {
            hs_client_ns: Some(4 * MS),
            hs_server_ns: Some(6 * MS),
            ..e
        };
        assert_eq!(decide(&e).0, Point::MidPath);
    }

    #[test]
    fn ttls_alone_and_as_tie_breaker() {
        let e = Evidence {
            ttl_client: Some(64),
            ttl_server: Some(61),
            ..Default::default()
        };
        let (p, why) = decide(&e);
        assert_eq!(p, Point::NearClient);
        assert!(why.contains("3 hop(s)"), "{why}");
        // A mid-path split leaning to the client, client at 0 hops.
        let e = Evidence {
            data_client_ns: Some(3 * MS),
            data_server_ns: Some(7 * MS),
            ..e
        };
        assert_eq!(decide(&e).0, Point::NearClient);
        // Leaning the other way: stays mid-path.
        let e = Evidence {
            data_client_ns: Some(7 * MS),
            data_server_ns: Some(3 * MS),
            ..e
        };
        assert_eq!(decide(&e).0, Point::MidPath);
        let (p, why) = decide(&Evidence::default());
        assert_eq!(p, Point::Unknown);
        assert!(why.starts_with("no handshake"));
        let e = Evidence {
            large_from_server: 3,
            ..Default::default()
        };
        assert!(decide(&e).1.contains("TSO"));
    }
}
