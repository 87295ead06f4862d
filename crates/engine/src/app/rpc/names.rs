//! File handle → path map shared by every RPC connection and UDP flow of
//! one analysis (MOUNT usually runs on another connection than the NFS
//! traffic that uses the root handle it returns).
//!
//! Paths are built from what the capture shows: the export path of a MOUNT
//! MNT reply, LOOKUP/CREATE/MKDIR/SYMLINK/MKNOD results, READDIRPLUS
//! entries, NFSv4 PUTROOTFH/LOOKUP/OPEN followed by GETFH. When the parent
//! directory is unknown the entry is relative ("dir/file"). The map is
//! bounded: past [`MAX_NAMES`] entries the oldest insertions are evicted
//! (and counted).

use std::collections::VecDeque;

// Looked up for every call: a fast hasher (seeded per process).
use foldhash::HashMap;

use crate::transactions::FileName;

/// Most handles remembered.
pub const MAX_NAMES: usize = 100_000;
/// Longest path stored; longer ones keep only their last component.
pub const MAX_PATH: usize = 1024;

#[derive(Debug)]
pub struct NameMap {
    map: HashMap<Vec<u8>, FileName>,
    /// Insertion order, for eviction (each handle appears once).
    order: VecDeque<Vec<u8>>,
    cap: usize,
    pub evictions: u64,
}

impl Default for NameMap {
    fn default() -> Self {
        Self::with_capacity(MAX_NAMES)
    }
}

impl NameMap {
    pub fn with_capacity(cap: usize) -> Self {
        NameMap {
            map: HashMap::default(),
            order: VecDeque::new(),
            cap: cap.max(1),
            evictions: 0,
        }
    }

    pub fn get(&self, fh: &[u8]) -> Option<&FileName> {
        self.map.get(fh)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn insert(&mut self, fh: &[u8], path: String) {
        if fh.is_empty() || path.is_empty() {
            return;
        }
        if let Some(old) = self.map.get_mut(fh) {
            if **old != *path {
                *old = path.into();
            }
            return;
        }
        while self.map.len() >= self.cap {
            match self.order.pop_front() {
                Some(k) => {
                    self.map.remove(&k);
                    self.evictions += 1;
                }
                None => break,
            }
        }
        self.map.insert(fh.to_vec(), path.into());
        self.order.push_back(fh.to_vec());
    }
}

/// `dir/name`, with `dir` unknown giving the bare name; "." is the
/// directory itself, ".." its parent.
pub fn join(dir: Option<&str>, name: &str) -> Option<String> {
    match name {
        "" => dir.map(str::to_string),
        "." => dir.map(str::to_string),
        ".." => dir.and_then(parent),
        _ => {
            let name = name.trim_end_matches('/');
            let p = match dir {
                Some("/") => format!("/{name}"),
                Some(d) if !d.is_empty() => format!("{}/{name}", d.trim_end_matches('/')),
                _ => name.to_string(),
            };
            Some(if p.len() > MAX_PATH {
                name.chars().take(MAX_PATH).collect()
            } else {
                p
            })
        }
    }
}

/// Parent directory of a path ("/a/b" → "/a", "/a" → "/"), `None` for a
/// relative single component.
pub fn parent(path: &str) -> Option<String> {
    let p = path.trim_end_matches('/');
    match p.rfind('/') {
        Some(0) => Some("/".to_string()),
        Some(i) => Some(p[..i].to_string()),
        None if path.starts_with('/') => Some("/".to_string()),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_and_parent() {
        assert_eq!(join(Some("/"), "a").as_deref(), Some("/a"));
        assert_eq!(join(Some("/x/"), "a").as_deref(), Some("/x/a"));
        assert_eq!(join(None, "a").as_deref(), Some("a"));
        assert_eq!(join(Some("/x/y"), "..").as_deref(), Some("/x"));
        assert_eq!(join(Some("/x"), ".").as_deref(), Some("/x"));
        assert_eq!(join(None, ".."), None);
        assert_eq!(parent("/a").as_deref(), Some("/"));
        assert_eq!(parent("rel"), None);
        let long = "n".repeat(MAX_PATH);
        assert_eq!(join(Some("/d"), &long).map(|s| s.len()), Some(MAX_PATH));
    }

    #[test]
    fn bounded_with_counted_eviction() {
        let mut m = NameMap::with_capacity(3);
        for i in 0..5u8 {
            m.insert(&[i], format!("f{i}"));
        }
        assert_eq!(m.len(), 3);
        assert_eq!(m.evictions, 2);
        assert_eq!(m.get(&[0]), None);
        assert_eq!(m.get(&[4]).map(|n| &**n), Some("f4"));
        // Renaming an entry does not grow the map.
        m.insert(&[4], "g".into());
        assert_eq!((m.len(), m.get(&[4]).map(|n| &**n)), (3, Some("g")));
    }
}
