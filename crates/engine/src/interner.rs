//! Names numbered in order of first appearance: per-request records keep a
//! `u32` instead of a string (operation, file, endpoint, status names repeat
//! across millions of requests).

/// Distinct file (or share) names kept per table that breaks results down
/// by file: a walk over millions of files must not grow memory with them
/// (the parsers' own name maps are bounded alike). Later names count
/// under [`OTHER_FILES`].
pub(crate) const MAX_FILE_NAMES: usize = 65_536;
/// The name the files past [`MAX_FILE_NAMES`] are counted under.
pub(crate) const OTHER_FILES: &str = "(other files)";

/// Strings and their numbers.
#[derive(Debug, Default)]
pub(crate) struct Interner {
    names: Vec<String>,
    ids: foldhash::HashMap<String, u32>,
}

impl Interner {
    /// The number of `s`, given on first sight.
    pub(crate) fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(s.to_string());
        self.ids.insert(s.to_string(), i);
        i
    }

    /// The number of `s` if it was given one.
    pub(crate) fn get(&self, s: &str) -> Option<u32> {
        self.ids.get(s).copied()
    }

    /// The name numbered `i` ("" for a number never given).
    pub(crate) fn name(&self, i: u32) -> &str {
        self.names.get(i as usize).map_or("", String::as_str)
    }

    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }

    /// Copies the names into the calling thread's allocations (see
    /// [`crate::heap::relocate_after_pass`]).
    pub(crate) fn relocate(&mut self) {
        crate::heap::renew(&mut self.names);
        self.ids = self.ids.clone();
    }
}

/// File (or share) names numbered as [`Interner`] does, but at most
/// [`MAX_FILE_NAMES`] of them: later names share the number of
/// [`OTHER_FILES`], and are counted.
#[derive(Debug, Default)]
pub(crate) struct FileNames {
    names: Interner,
    /// Names counted under [`OTHER_FILES`] as the bound was reached.
    pub folded: u64,
}

impl FileNames {
    /// See [`Interner::relocate`].
    pub(crate) fn relocate(&mut self) {
        self.names.relocate();
    }

    pub(crate) fn id(&mut self, s: &str) -> u32 {
        if let Some(i) = self.names.get(s) {
            return i;
        }
        if self.names.len() < MAX_FILE_NAMES {
            return self.names.id(s);
        }
        self.folded += 1;
        self.names.id(OTHER_FILES)
    }

    pub(crate) fn name(&self, i: u32) -> &str {
        self.names.name(i)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_order_of_first_sight() {
        let mut n = Interner::default();
        assert_eq!((n.id("READ"), n.id("WRITE"), n.id("READ")), (0, 1, 0));
        assert_eq!((n.name(1), n.name(7), n.len()), ("WRITE", "", 2));
        assert_eq!((n.get("WRITE"), n.get("COMMIT")), (Some(1), None));
    }

    #[test]
    fn file_names_are_bounded() {
        let mut names = FileNames::default();
        let ids: Vec<u32> = (0..MAX_FILE_NAMES + 3)
            .map(|i| names.id(&format!("f{i}")))
            .collect();
        assert_eq!(names.folded, 3);
        assert_eq!(ids[MAX_FILE_NAMES - 1] as usize, MAX_FILE_NAMES - 1);
        let other = ids[MAX_FILE_NAMES];
        assert_eq!(names.name(other), OTHER_FILES);
        assert!(ids[MAX_FILE_NAMES..].iter().all(|&i| i == other));
        // A name kept before the bound keeps its number.
        assert_eq!(names.id("f7"), 7);
        assert_eq!(names.folded, 3);
    }
}
