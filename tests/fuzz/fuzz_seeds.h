/* What the fuzz harnesses share with their replay driver: the seed table
 * each one provides, and the core harness's input encoding. */
#ifndef BH_FUZZ_SEEDS_H
#define BH_FUZZ_SEEDS_H

#include <stddef.h>
#include <stdint.h>

/* A hand-written input: the committed corpus starts from these, and the
 * replay driver runs them before the corpus files. */
struct bhf_seed {
	const char *name;
	const uint8_t *data;
	size_t len;
};

extern const struct bhf_seed bhf_seeds[];
extern const unsigned bhf_nseeds;

/*
 * The core harness's input: two configuration bytes, then operations.
 *   byte 0: bits 0-1 max_concurrent - 1; bit 2 BH_FAIR; bits 3-5 queue
 *           capacity (0, 1, 2, 3, 4, 6, 8, unbounded); bit 6 a head spins
 *           200 ns (so short holds pre-wake the next head); bit 7 BH_NO_STATS
 *   byte 1: bits 0-1 the starvation delay (0, 300 ns, 3 us, 1 ms); bit 2
 *           BH_TRACK_HOLD; bit 3 (the host-wide harness, fuzz_shm_api) a
 *           segment with 3 thread slots instead of 16
 * Each operation is an opcode byte (taken modulo BHF_NOPS) and its
 * argument bytes; a missing byte reads as 0. k is a blocking waiter (0-5,
 * from 3 bits modulo 6), j an async node (0-3), n a permit count (0-7, so 0
 * and above the limit occur).
 */
enum {
	BHF_TRY,     /* n: bh_try_acquire from the main thread */
	BHF_ACQ,     /* k | n << 3, deadline: waiter k calls bh_acquire */
	BHF_RESUME,  /* k | how << 3: k's wait returns 0, -EINTR, -EAGAIN, -ETIMEDOUT */
	BHF_CANCEL,  /* k: pthread_cancel a waiting waiter */
	BHF_ASYNC,   /* j | n << 2: bh_acquire_async on node j */
	BHF_ACANCEL, /* j: bh_cancel_async */
	BHF_REL,     /* n: bh_release from the main thread */
	BHF_CLOSE,   /* bh_close */
	BHF_SETLIM,  /* m: bh_set_limit(m & 7) */
	BHF_CLOCK,   /* d: the clock advances (d + 1) x 50 ns */
	BHF_WAKEALL, /* every waiter with a wake pending returns from its wait */
	BHF_HOLD,    /* d: bh_record_hold((d + 1) us) */
	BHF_NULLS,   /* the async calls with NULL arguments, and bh_destroy(NULL) */
	BHF_NOPS
};
#define BHF_CFG_FAIR 0x04
#define BHF_CFG_SPIN 0x40
#define BHF_CFG_NOSTATS 0x80
#define BHF_CFG1_HOLD 0x04
#define BHF_CFG1_FEWSLOTS 0x08 /* host-wide: 3 thread slots, not 16 */
/* deadline byte: 0 forever, 1 zero, 2 now, else now + 100 ns x byte */
#define BHF_DL_FOREVER 0
#define BHF_DL_ZERO 1
#define BHF_DL_NOW 2

#endif /* BH_FUZZ_SEEDS_H */
