//! Zero-window episodes: from the first segment a host sends with a window
//! of 0 (SYN and RST segments excluded, as in Wireshark's `zero_window`) to
//! the first one it sends with a non-zero window, with the probes the peer
//! sent meanwhile (Wireshark's `zero_window_probe`, and `keep_alive`
//! segments, which is what Linux's probes look like). An episode still open
//! when the connection ends (or is reset) is closed at its last frame and
//! marked unresolved.

/// One finished episode. `host_dir` is the direction of the host that
/// advertised the zero window (0 = `a` → `b`); the stalled data flows the
/// other way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Episode {
    pub stream: u32,
    pub host_dir: u8,
    pub start_frame: u64,
    pub start_ts: i64,
    /// The frame that reopened the window (None when unresolved).
    pub end_frame: Option<u64>,
    pub end_ts: i64,
    pub probes: u32,
    /// The window reopened within the capture.
    pub resolved: bool,
}

impl Episode {
    pub fn duration_ns(&self) -> i64 {
        (self.end_ts - self.start_ts).max(0)
    }
}

#[derive(Debug, Clone, Copy)]
struct Open {
    start_frame: u64,
    start_ts: i64,
    probes: u32,
}

/// Zero-window state of one connection.
#[derive(Debug, Clone, Default)]
pub struct ZeroWindow {
    open: [Option<Open>; 2],
    /// Episodes started, per advertising direction.
    pub episodes: [u32; 2],
    /// Time spent in episodes (closed ones), per advertising direction.
    pub stalled_ns: [i64; 2],
    pub probes: [u32; 2],
}

impl ZeroWindow {
    /// Whether the host sending in `dir` currently advertises a zero window.
    pub fn is_open(&self, dir: usize) -> bool {
        self.open[dir].is_some()
    }

    /// A segment from `dir` with raw window `window`. Returns an episode it
    /// ends. SYN and RST segments are ignored (see [`Self::close_all`]).
    pub fn on_window(
        &mut self,
        stream: u32,
        dir: usize,
        frame: u64,
        ts: i64,
        window: u16,
    ) -> Option<Episode> {
        match (window, self.open[dir]) {
            (0, None) => {
                self.open[dir] = Some(Open {
                    start_frame: frame,
                    start_ts: ts,
                    probes: 0,
                });
                self.episodes[dir] += 1;
                None
            }
            (w, Some(o)) if w > 0 => {
                self.open[dir] = None;
                Some(self.close(stream, dir, o, Some(frame), ts))
            }
            _ => None,
        }
    }

    /// A probe sent in `sender_dir` (into the peer's closed window).
    pub fn on_probe(&mut self, sender_dir: usize) {
        if let Some(o) = self.open[1 - sender_dir].as_mut() {
            o.probes += 1;
        }
    }

    /// End of the connection (or a RST) at `ts`: close what is open,
    /// unresolved.
    pub fn close_all(&mut self, stream: u32, ts: i64) -> Vec<Episode> {
        let mut out = Vec::new();
        for dir in 0..2 {
            if let Some(o) = self.open[dir].take() {
                out.push(self.close(stream, dir, o, None, ts));
            }
        }
        out
    }

    fn close(&mut self, stream: u32, dir: usize, o: Open, end: Option<u64>, ts: i64) -> Episode {
        let e = Episode {
            stream,
            host_dir: dir as u8,
            start_frame: o.start_frame,
            start_ts: o.start_ts,
            end_frame: end,
            end_ts: ts.max(o.start_ts),
            probes: o.probes,
            resolved: end.is_some(),
        };
        self.stalled_ns[dir] += e.duration_ns();
        self.probes[dir] += o.probes;
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn episode_with_probes_and_reopening() {
        let mut z = ZeroWindow::default();
        assert!(z.on_window(3, 1, 10, 100, 500).is_none());
        assert!(z.on_window(3, 1, 11, 200, 0).is_none());
        assert!(z.is_open(1));
        // Still zero: same episode.
        assert!(z.on_window(3, 1, 12, 250, 0).is_none());
        z.on_probe(0);
        z.on_probe(0);
        z.on_probe(1); // the other way: no episode there
        let e = z.on_window(3, 1, 15, 900, 300).unwrap();
        assert_eq!(
            e,
            Episode {
                stream: 3,
                host_dir: 1,
                start_frame: 11,
                start_ts: 200,
                end_frame: Some(15),
                end_ts: 900,
                probes: 2,
                resolved: true
            }
        );
        assert_eq!(e.duration_ns(), 700);
        assert_eq!((z.episodes[1], z.stalled_ns[1], z.probes[1]), (1, 700, 2));
        assert!(!z.is_open(1));
    }

    #[test]
    fn open_episode_is_closed_unresolved() {
        let mut z = ZeroWindow::default();
        z.on_window(0, 0, 5, 1_000, 0);
        let v = z.close_all(0, 5_000);
        assert_eq!(v.len(), 1);
        assert!(!v[0].resolved);
        assert_eq!(v[0].end_frame, None);
        assert_eq!(v[0].duration_ns(), 4_000);
        assert!(z.close_all(0, 6_000).is_empty());
    }
}
