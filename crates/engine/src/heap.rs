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

/// Large blocks (128 KiB and more) get pages of their own, given back when
/// freed, during the pass (see [`pool_large_blocks`] for after it).
///
/// glibc's malloc starts with that threshold but raises it to the size of
/// any such block freed (up to 32 MiB), so that after the first grown list
/// or hash table, blocks of megabytes come from the threads' arenas. A list
/// that grows there leaves its old buffer as a hole, which the small
/// allocations of open connections then take, and the freed pages stay
/// resident. With 8,640 connections open at once the arenas held 80 MB
/// free for 62 MB in use at the pass's peak; fixing the threshold took the
/// command's peak from 150-155 to 144-147 MB, at the same speed. (The
/// setting is the process's: analyses run at once on several threads share
/// it, which changes where their memory comes from, not what they find.)
pub(crate) fn keep_large_blocks_apart() {
    set_large_block_thresholds(128 * 1024, 128 * 1024);
}

/// After the pass: large blocks come from the arenas again and freed memory
/// stays there for reuse, as glibc's own thresholds would have it by then
/// (at most 32 MiB, and trimming past twice that). The digest and the
/// tables after the pass allocate and free blocks of megabytes over and
/// over; each on pages of its own, the page faults made the digest of one
/// long connection 15 % slower (0.036 -> 0.043 s), while the memory it
/// saves mattered only during the pass.
pub(crate) fn pool_large_blocks() {
    set_large_block_thresholds(32 << 20, 64 << 20);
}

fn set_large_block_thresholds(mmap: std::ffi::c_int, trim: std::ffi::c_int) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn mallopt(param: std::ffi::c_int, value: std::ffi::c_int) -> std::ffi::c_int;
        }
        // glibc's <malloc.h>: M_TRIM_THRESHOLD, M_MMAP_THRESHOLD.
        const TRIM_THRESHOLD: std::ffi::c_int = -1;
        const MMAP_THRESHOLD: std::ffi::c_int = -3;
        // SAFETY: `mallopt` takes two integers and returns a flag, touching
        // no memory of ours. glibc marks it MT-Unsafe for two reasons, and
        // neither applies: "init" (it may initialise malloc, done long
        // before: this process has allocated), and "const" (it writes the
        // two thresholds without a lock, while other threads' allocations
        // read them; glibc's own `free` writes the same two fields the same
        // way to raise them, so either value is one malloc is made to
        // handle, and blocks made under the old one are freed by their own
        // header's flag).
        unsafe {
            mallopt(MMAP_THRESHOLD, mmap);
            mallopt(TRIM_THRESHOLD, trim);
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = (mmap, trim);
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

    /// After a large block was freed, the next ones still get pages of
    /// their own (glibc would have raised its threshold to the freed
    /// block's size and served them from an arena): in a process of its
    /// own, where no other test's freed blocks lie in the arenas to serve
    /// them from.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn large_blocks_stay_apart_after_a_larger_one_is_freed() {
        let exe = std::env::current_exe().expect("test binary");
        let out = std::process::Command::new(exe)
            .args([
                "--exact",
                "heap::tests::large_blocks_apart_here",
                "--ignored",
            ])
            .args(["--test-threads", "1"])
            .output()
            .expect("test binary runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        assert!(stdout.contains("1 passed"), "{stdout}");
    }

    /// (Run by the test above.) A block of pages has a usable size of its
    /// request rounded up to whole pages, one from an arena to 16 bytes.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    #[ignore = "run in a process of its own by large_blocks_stay_apart_after_a_larger_one_is_freed"]
    fn large_blocks_apart_here() {
        extern "C" {
            fn malloc_usable_size(ptr: *mut std::ffi::c_void) -> usize;
        }
        keep_large_blocks_apart();
        let usable = |v: &mut Vec<u8>| {
            // SAFETY: the pointer is the start of a live block from
            // malloc (Rust's global allocator is the system's), which is
            // all `malloc_usable_size` reads.
            unsafe { malloc_usable_size(v.as_mut_ptr().cast()) }
        };
        for size in [8 << 20, 300 << 10] {
            drop(std::hint::black_box(vec![1u8; 16 << 20]));
            let mut v = std::hint::black_box(vec![1u8; size]);
            assert!(usable(&mut v) >= size + 2048, "{size} bytes");
        }
        // (A small block stays in the arena, within 16 bytes.)
        let mut small = std::hint::black_box(vec![1u8; 1000]);
        assert!(usable(&mut small) < 1000 + 32);
    }
}
