/* Compiler and CPU helpers shared by every layer of libbulkhead. Private:
 * the prefix is BHI_ (bhi_ for the function-like ones), never the public
 * BH_, and no protocol lives here. Include it as "lib/compiler.h". */
#ifndef BHI_COMPILER_H
#define BHI_COMPILER_H

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Branch hints: the fast paths are laid out for the common case. */
#define BHI_LIKELY(x) __builtin_expect(!!(x), 1)
#define BHI_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* The alignment that keeps independently written fields on separate
 * lines (64 bytes on x86-64 and on the common arm64 cores). */
#define BHI_CACHELINE 64

/* Slow paths stay out of line so the fast paths keep few registers. */
#define BHI_COLD __attribute__((noinline, cold))

/* The entry points of the uncontended pair start on a cache line of their
 * own. Functions are laid out one after another (the cold parts of every
 * file first), so otherwise any change elsewhere in the library moves
 * them, and how their few hot instructions fall across lines and the
 * decoder's 32-byte windows moved the pair by 10% (AMD EPYC, Zen 3: 1.07x
 * sem_t's time at one offset, 1.20x at another, same code). */
#define BHI_HOT_ENTRY __attribute__((aligned(BHI_CACHELINE)))

/* One spin iteration: tells the core a spin-wait loop is running (pause on
 * x86, yield on arm64), a compiler barrier elsewhere. */
#if defined(__x86_64__) || defined(__i386__)
#define bhi_cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define bhi_cpu_relax() __asm__ __volatile__("yield" ::: "memory")
#else
#define bhi_cpu_relax() __asm__ __volatile__("" ::: "memory")
#endif

/* The structure that embeds the member p points to. */
#define bhi_container_of(p, type, member) \
	((type *)(void *)((char *)(p) - offsetof(type, member)))

/* size bytes aligned to align (a power of two), zeroed, or NULL when out of
 * memory (the callers return -ENOMEM). The block is rounded up to a
 * multiple of align, as aligned_alloc requires, and all of it is zeroed.
 * errno is left as it was: the library never sets errno, not even on
 * ENOMEM. Free it with bhi_free_aligned. */
static inline void *bhi_zalloc_aligned(size_t size, size_t align)
{
	size_t rounded = (size + align - 1) & ~(align - 1);
	int saved = errno;
	void *p = rounded < size ? NULL : aligned_alloc(align, rounded);

	errno = saved;
	if (p)
		memset(p, 0, rounded);
	return p;
}

static inline void bhi_free_aligned(void *p)
{
	free(p);
}

#endif /* BHI_COMPILER_H */
