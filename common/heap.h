// Copyright 2026 The kvstore Authors.
//
// ReleaseFreeHeapMemory: hands heap memory that is free (allocated, then
// freed) back to the kernel, whichever allocator the binary was linked with.
//
// Why: kvserver links jemalloc (server/BUILD.bazel, `malloc`), as Redis
// does: a replicated SET allocates and frees a dozen small closures and
// strings on the RESP loop, and glibc's malloc cost 5-10 % of that loop
// (docs/performance.md §1.2). Tests and the tools keep glibc's malloc. Code
// that frees a lot at once (the RESP loop's sweep of idle connections'
// buffers) calls this instead of glibc's malloc_trim(), which does nothing
// for memory jemalloc holds.
//
// How: jemalloc is found at run time (a weak reference to its `mallctl`),
// so this library does not depend on it; with jemalloc every arena is
// purged, otherwise malloc_trim(0) runs.
//
// Thread-safe. Costs a walk of the allocator's free memory: call it after a
// large release, not per free.

#ifndef KVSTORE_COMMON_HEAP_H_
#define KVSTORE_COMMON_HEAP_H_

namespace kvstore {

enum class HeapAllocator { kGlibc, kJemalloc };

// The allocator this process's malloc() is.
HeapAllocator CurrentHeapAllocator();

// See the file comment. Best effort: an allocator that refuses is ignored.
void ReleaseFreeHeapMemory();

}  // namespace kvstore

#endif  // KVSTORE_COMMON_HEAP_H_
