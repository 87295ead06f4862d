//! NFSv4 COMPOUND lists as text: the operations of a call
//! ("SEQUENCE,PUTFH,READ") and the statuses of a reply's operations
//! ("NFS4_OK,NFS4_OK,NFS4_OK"). Every request has both, and a few lists make
//! most of a capture's, so each list is made once and shared: made per
//! request, their two strings were a third of the allocations of the
//! NFS/SMB stage on NFSv4.1.

use std::sync::Arc;

use smallvec::SmallVec;

/// Lists kept, at most, and the longest kept: beyond them (a capture of
/// many odd COMPOUNDs; a COMPOUND may name thousands of operations) a list
/// is made each time, as before. What is kept stays under half a megabyte
/// per kind of list.
const KEPT: usize = 1024;
const KEPT_LEN: usize = 16;

/// The texts of lists of numbers, each number named by the same function.
#[derive(Debug, Default)]
pub struct Joined {
    made: foldhash::HashMap<SmallVec<[u32; 8]>, Arc<str>>,
    /// The last list asked for and its text: a copy's requests repeat one
    /// list (SEQUENCE,PUTFH,READ), and comparing it costs less than hashing
    /// it (the lookups were 3 % of the NFS/SMB stage on NFSv4.1 reads).
    last: Option<(SmallVec<[u32; 8]>, Arc<str>)>,
}

impl Joined {
    /// `codes` named by `name` and joined by ",".
    pub fn text(&mut self, codes: &[u32], name: fn(u32) -> &'static str) -> Arc<str> {
        if let Some((last, s)) = &self.last {
            if last.as_slice() == codes {
                return Arc::clone(s);
            }
        }
        let s = self.made_text(codes, name);
        if codes.len() <= KEPT_LEN {
            self.last = Some((SmallVec::from_slice(codes), Arc::clone(&s)));
        }
        s
    }

    fn made_text(&mut self, codes: &[u32], name: fn(u32) -> &'static str) -> Arc<str> {
        if let Some(s) = self.made.get(codes) {
            return Arc::clone(s);
        }
        let mut s = String::with_capacity(10 * codes.len());
        for &c in codes {
            if !s.is_empty() {
                s.push(',');
            }
            s.push_str(name(c));
        }
        let s: Arc<str> = s.into();
        if self.made.len() < KEPT && codes.len() <= KEPT_LEN {
            self.made
                .insert(SmallVec::from_slice(codes), Arc::clone(&s));
        }
        s
    }
}

/// Both kinds of list of an analysis.
#[derive(Debug, Default)]
pub struct CompoundTexts {
    pub ops: Joined,
    pub statuses: Joined,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(c: u32) -> &'static str {
        ["A", "BB", "CCC"][c as usize % 3]
    }

    #[test]
    fn lists_are_joined_and_made_once() {
        let mut j = Joined::default();
        let a = j.text(&[0, 1, 2], name);
        assert_eq!(&*a, "A,BB,CCC");
        let again = j.text(&[0, 1, 2], name);
        assert!(Arc::ptr_eq(&a, &again), "shared");
        assert_eq!(&*j.text(&[], name), "");
        assert_eq!(&*j.text(&[2], name), "CCC");
        assert_eq!(
            &*j.text(&[2, 0, 1, 2, 0, 1, 2, 0, 1, 2], name),
            "CCC,A,BB,CCC,A,BB,CCC,A,BB,CCC"
        );
    }

    #[test]
    fn past_the_kept_lists_each_is_still_made() {
        let mut j = Joined::default();
        for i in 0..KEPT as u32 + 10 {
            assert_eq!(&*j.text(&[i, i], name), format!("{0},{0}", name(i)));
        }
        assert_eq!(j.made.len(), KEPT);
        let late = KEPT as u32 + 5;
        let a = j.text(&[late, late], name);
        // (The last list asked for is still shared.)
        assert!(Arc::ptr_eq(&a, &j.text(&[late, late], name)), "the last");
        j.text(&[1], name);
        let b = j.text(&[late, late], name);
        assert_eq!(a, b);
        assert!(!Arc::ptr_eq(&a, &b), "not kept");
    }

    #[test]
    fn long_lists_are_made_each_time() {
        let mut j = Joined::default();
        let long: Vec<u32> = (0..KEPT_LEN as u32 + 1).collect();
        let a = j.text(&long, name);
        let b = j.text(&long, name);
        assert_eq!(a, b);
        assert!(!Arc::ptr_eq(&a, &b), "not kept");
        assert!(j.made.is_empty());
        let a = j.text(&long[..KEPT_LEN], name);
        assert!(Arc::ptr_eq(&a, &j.text(&long[..KEPT_LEN], name)), "kept");
    }
}
