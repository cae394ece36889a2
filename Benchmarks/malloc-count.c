/* A preload library that counts heap allocations, for tools/bench.py.
 * Build: cc -O2 -shared -fPIC -o malloc-count.so malloc-count.c
 * nmea-bench finds keeptrack_malloc_count() with dlsym and reports steady-state allocations. */
#include <stddef.h>
#include <stdatomic.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static atomic_ulong count;

unsigned long keeptrack_malloc_count(void) { return atomic_load_explicit(&count, memory_order_relaxed); }

void *malloc(size_t n) {
    atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
    return __libc_malloc(n);
}

void *calloc(size_t a, size_t b) {
    atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
    return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n) {
    atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
    return __libc_realloc(p, n);
}

int posix_memalign(void **out, size_t alignment, size_t n) {
    atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
    void *p = __libc_memalign(alignment, n);
    if (!p) return 12; /* ENOMEM */
    *out = p;
    return 0;
}

void *aligned_alloc(size_t alignment, size_t n) {
    atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
    return __libc_memalign(alignment, n);
}

void *memalign(size_t alignment, size_t n) {
    atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
    return __libc_memalign(alignment, n);
}
