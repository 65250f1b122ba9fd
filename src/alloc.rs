//! The global allocator. mimalloc keeps small objects of one size together, so long-lived
//! actors are not interleaved with the short-lived buffers of database rows decoded on the
//! same threads: an idle payment actor costs about half the memory it did under glibc's
//! malloc on PostgreSQL (docs/performance.md).

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Returns freed memory to the OS (the actors' sweeper calls it after passivating).
pub fn release_free_memory() {
    // SAFETY: mi_collect only walks and releases mimalloc's own free memory.
    unsafe { libmimalloc_sys::mi_collect(true) }
}
