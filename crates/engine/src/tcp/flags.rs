//! The TCP expert flags, named as Wireshark names them (`tcp.analysis.NAME`).

/// One TCP analysis flag. The discriminant is the bit in a [`FlagSet`] and
/// the index in a [`FlagCounts`].
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[repr(u8)]
pub enum Flag {
    Retransmission = 0,
    FastRetransmission,
    SpuriousRetransmission,
    OutOfOrder,
    LostSegment,
    AckLostSegment,
    DuplicateAck,
    ZeroWindow,
    ZeroWindowProbe,
    ZeroWindowProbeAck,
    WindowFull,
    WindowUpdate,
    KeepAlive,
    KeepAliveAck,
    ReusedPorts,
}

impl Flag {
    /// Every flag, in output order.
    pub const ALL: [Flag; 15] = [
        Flag::Retransmission,
        Flag::FastRetransmission,
        Flag::SpuriousRetransmission,
        Flag::OutOfOrder,
        Flag::LostSegment,
        Flag::AckLostSegment,
        Flag::DuplicateAck,
        Flag::ZeroWindow,
        Flag::ZeroWindowProbe,
        Flag::ZeroWindowProbeAck,
        Flag::WindowFull,
        Flag::WindowUpdate,
        Flag::KeepAlive,
        Flag::KeepAliveAck,
        Flag::ReusedPorts,
    ];
    pub const COUNT: usize = Self::ALL.len();

    /// Wireshark's name: the display filter is `tcp.analysis.<name>`.
    pub fn name(self) -> &'static str {
        match self {
            Flag::Retransmission => "retransmission",
            Flag::FastRetransmission => "fast_retransmission",
            Flag::SpuriousRetransmission => "spurious_retransmission",
            Flag::OutOfOrder => "out_of_order",
            Flag::LostSegment => "lost_segment",
            Flag::AckLostSegment => "ack_lost_segment",
            Flag::DuplicateAck => "duplicate_ack",
            Flag::ZeroWindow => "zero_window",
            Flag::ZeroWindowProbe => "zero_window_probe",
            Flag::ZeroWindowProbeAck => "zero_window_probe_ack",
            Flag::WindowFull => "window_full",
            Flag::WindowUpdate => "window_update",
            Flag::KeepAlive => "keep_alive",
            Flag::KeepAliveAck => "keep_alive_ack",
            Flag::ReusedPorts => "reused_ports",
        }
    }

    pub fn from_name(name: &str) -> Option<Flag> {
        Flag::ALL.into_iter().find(|f| f.name() == name)
    }

    #[inline]
    fn bit(self) -> u16 {
        1 << self as u8
    }
}

/// A set of flags (one bit each).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlagSet(u16);

impl FlagSet {
    pub const EMPTY: FlagSet = FlagSet(0);

    #[inline]
    pub fn insert(&mut self, f: Flag) {
        self.0 |= f.bit();
    }

    #[inline]
    pub fn contains(self, f: Flag) -> bool {
        self.0 & f.bit() != 0
    }

    #[inline]
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The flags as Wireshark reports them: a fast or spurious
    /// retransmission also carries the generic `retransmission` expert item
    /// (so `tcp.analysis.retransmission` matches all three kinds).
    pub fn reported(self) -> FlagSet {
        let mut r = self;
        if self.contains(Flag::FastRetransmission) || self.contains(Flag::SpuriousRetransmission) {
            r.insert(Flag::Retransmission);
        }
        r
    }

    /// The flags in the set, in [`Flag::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Flag> {
        Flag::ALL.into_iter().filter(move |f| self.contains(*f))
    }
}

impl From<Flag> for FlagSet {
    fn from(f: Flag) -> Self {
        FlagSet(f.bit())
    }
}

/// How many frames carried each flag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlagCounts(pub [u64; Flag::COUNT]);

impl FlagCounts {
    #[inline]
    pub fn get(&self, f: Flag) -> u64 {
        self.0[f as usize]
    }

    pub fn add_set(&mut self, s: FlagSet) {
        for f in s.iter() {
            self.0[f as usize] += 1;
        }
    }

    pub fn add(&mut self, other: &FlagCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// (name, count) for every flag, in [`Flag::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Flag::ALL.into_iter().map(|f| (f.name(), self.get(f)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        for f in Flag::ALL {
            assert_eq!(Flag::from_name(f.name()), Some(f));
            assert_eq!(Flag::ALL[f as usize], f);
        }
        assert_eq!(Flag::from_name("nope"), None);
    }

    #[test]
    fn reported_adds_generic_retransmission() {
        let s = FlagSet::from(Flag::FastRetransmission).reported();
        assert!(s.contains(Flag::Retransmission) && s.contains(Flag::FastRetransmission));
        let s = FlagSet::from(Flag::SpuriousRetransmission).reported();
        assert!(s.contains(Flag::Retransmission));
        let s = FlagSet::from(Flag::OutOfOrder).reported();
        assert!(!s.contains(Flag::Retransmission));
        let mut c = FlagCounts::default();
        c.add_set(FlagSet::from(Flag::FastRetransmission).reported());
        assert_eq!(c.get(Flag::Retransmission), 1);
        assert_eq!(c.total(), 2);
    }
}
