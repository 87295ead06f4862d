//! Capture format and compression detection, by content only.

/// How the capture bytes are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }

    pub(crate) fn sniff(magic: &[u8]) -> Compression {
        if magic.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }
}

/// The container format of a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// Classic libpcap. `modified` is Alexey Kuznetsov's patched format.
    Pcap {
        big_endian: bool,
        nanosecond: bool,
        modified: bool,
        version_major: u16,
        version_minor: u16,
    },
    PcapNg,
    /// Solaris snoop (RFC 1761).
    Snoop,
}

impl FileFormat {
    /// Human-readable description, e.g. "pcap (little-endian, microsecond, v2.4)".
    pub fn describe(&self) -> String {
        match self {
            FileFormat::Pcap {
                big_endian,
                nanosecond,
                modified,
                version_major,
                version_minor,
            } => format!(
                "pcap ({}, {}{}, v{}.{})",
                if *big_endian {
                    "big-endian"
                } else {
                    "little-endian"
                },
                if *nanosecond {
                    "nanosecond"
                } else {
                    "microsecond"
                },
                if *modified { ", modified" } else { "" },
                version_major,
                version_minor
            ),
            FileFormat::PcapNg => "pcapng".to_string(),
            FileFormat::Snoop => "snoop".to_string(),
        }
    }

    /// Short machine-readable name: "pcap", "pcapng" or "snoop".
    pub fn name(&self) -> &'static str {
        match self {
            FileFormat::Pcap { .. } => "pcap",
            FileFormat::PcapNg => "pcapng",
            FileFormat::Snoop => "snoop",
        }
    }
}

pub(crate) const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
pub(crate) const SNOOP_MAGIC: &[u8; 8] = b"snoop\0\0\0";
