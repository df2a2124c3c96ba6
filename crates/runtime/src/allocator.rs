//! The global memory allocator of every process that links this crate (each binary, and the
//! benches, so that they measure what ships): mimalloc instead of the C library's malloc.
//!
//! Under load a node allocates and frees many short-lived buffers on each runtime worker.
//! glibc gives each thread an arena that it grows (`mprotect`, page faults) and trims again
//! as those allocations come and go; a profile of a node under the bridge benchmark spent
//! about a fifth of its CPU there (`docs/benchmarks.md`, "One allocator for every binary").

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
