//! Giving the allocator's free memory back to the system once the analysis
//! is made, and moving what outlives the pass out of the stage threads'
//! allocator arenas first.
//!
//! The pass frees most of what it used (read buffers, batches in flight,
//! the state of every open connection), and the digest frees its working
//! sets; glibc's malloc keeps those pages (in several arenas, one per
//! thread that allocated) for later use, and they would stay in the
//! process's resident memory while Python reads the tables and runs the
//! diagnosis on top of them: a larger capture, whose passes and digests
//! are larger, would then peak higher for that alone.

/// Gives `v` a buffer allocated by the calling thread, of exactly its
/// length, and its items copies made by it too (`Clone` copies what they
/// own: the strings, lists and boxes in them; the `relocate` methods,
/// [`relocate_after_pass`]).
pub(crate) fn renew<T: Clone>(v: &mut Vec<T>) {
    if v.capacity() > 0 {
        *v = v.to_vec();
    }
}

/// Moves what outlives the pass out of the stage threads' allocator arenas,
/// and gives the freed memory back.
///
/// glibc gives each thread that allocates an arena of its own, and a page
/// of it goes back to the system only when nothing on it is in use. Over
/// the whole pass the stage threads interleave the state of every open
/// connection (freed when the pass ends) with what is kept: the series
/// bins, the connection summaries, the srt groups, the request facts, a
/// few hundred bytes here and there. With 8,640 connections open at once
/// the 37 MB kept held 93 MB of the two stage arenas resident (`malloc_trim`
/// gives back only whole free pages) through the digest and the diagnosis.
/// Copied by the thread that ran the pass, into its own arena and
/// compactly, the stage arenas empty and go back whole: 127 → 75 MB
/// resident after the pass there, for about 40 ms of copying, and the
/// command's peak 178-193 → 157 MB. Large lists are copied too: left where
/// they were, they kept about 40 MB more resident.
pub(crate) fn relocate_after_pass(
    tcp: &mut crate::tcp::TcpAnalysis,
    log: &mut crate::transactions::TransactionLog,
) {
    tcp.relocate();
    log.relocate();
    give_back_free_memory();
}

/// Return the allocator's free pages to the system (glibc only; elsewhere
/// nothing to do, or nothing portable to do it with).
pub(crate) fn give_back_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: `malloc_trim` takes no pointer and returns a flag; it
        // only releases pages that the allocator itself holds as free,
        // under the allocator's own locks (glibc documents it MT-Safe), so
        // no memory that Rust (or anyone) still uses is touched.
        unsafe {
            malloc_trim(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A renewed list keeps its items in a buffer of its own, exactly as
    /// long, and what they own is copied too.
    #[test]
    fn renewed_lists_keep_their_items() {
        let mut v: Vec<String> = Vec::with_capacity(100);
        v.extend(["a".to_string(), "bb".repeat(20)]);
        let (old, old_item) = (v.as_ptr(), v[1].as_ptr());
        renew(&mut v);
        assert_eq!(v, ["a".to_string(), "bb".repeat(20)]);
        assert_eq!(v.capacity(), 2);
        assert_ne!(v.as_ptr(), old);
        assert_ne!(v[1].as_ptr(), old_item);
    }
}
