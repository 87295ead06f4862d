//! Giving the allocator's free memory back to the system once the analysis
//! is made.
//!
//! The pass frees most of what it used (read buffers, batches in flight,
//! the state of every open connection), and the digest frees its working
//! sets; glibc's malloc keeps those pages (in several arenas, one per
//! thread that allocated) for later use, and they would stay in the
//! process's resident memory while Python reads the tables and runs the
//! diagnosis on top of them: a larger capture, whose passes and digests
//! are larger, would then peak higher for that alone.

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
