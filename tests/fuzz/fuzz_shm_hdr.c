/* A fuzz harness for the host-wide bulkhead's segment validation
 * (bh_shm_open attaching to a file it did not create).
 *
 * Once, in a private BH_SHM_DIR (a directory under TMPDIR, removed at exit;
 * libFuzzer's own exits skip that, so tests/fuzz/run.sh points TMPDIR into
 * the fuzz build), a real segment of a small geometry is created and its
 * bytes kept as the template. Each input then writes a file at the segment's name and
 * attaches to it. bh_shm_open must return 0 or a negative errno, never
 * crash, never touch memory outside the mapping (ASan) and never take a
 * SIGBUS (a file shorter than its header says is refused before it is
 * mapped); the unchanged template must attach. When it attaches, a try,
 * a release, a scan for dead processes and bh_stats run on it, and
 * bh_destroy detaches.
 *
 * Input:
 *   byte 0  bit 0: start from the template (else the rest is the file);
 *           bit 1: after the edits, set the header's checksum right (so
 *           the checks behind the checksum are reached);
 *           bits 2-3: the size: kept, cut to bytes 1-2 (modulo the size),
 *           grown by a page, one byte short;
 *           bits 4-5: the cfg given: none, the creator's, another limit.
 *   bytes 1-2  the cut (little-endian)
 *   then edits of three bytes: offset (little-endian; bit 15 clear: into
 *           the header and the word and lock after it, else anywhere) and
 *           the byte to write there.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_seeds.h"
#include "shm/hooks.h"
#include "shm/seg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NAME "fz"
#define LIMIT 2

static char dir[64], path[128];
static uint8_t *tmpl;
static size_t tmpl_size;

static void fail(const char *what, int r)
{
	fprintf(stderr, "bhfuzz: shm segment: %s (%d: %s)\n", what, r, strerror(r < 0 ? -r : r));
	abort();
}

static void cleanup(void)
{
	unlink(path);
	rmdir(dir);
}

static const struct bh_config creator_cfg = {
	.max_concurrent = LIMIT,
	.queue_capacity = 2,
};

/* Make the template: a segment as bh_shm_open creates it. */
static void setup(void)
{
	bulkhead_t *bh;
	int fd, r;
	struct stat st;

	snprintf(dir, sizeof(dir), "%s/bhfuzz-shm.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (strlen(dir) >= sizeof(dir) - 1 || !mkdtemp(dir))
		fail("cannot make a temporary directory", -errno);
	setenv("BH_SHM_DIR", dir, 1);
	snprintf(path, sizeof(path), "%s/bulkhead." NAME, dir);
	atexit(cleanup);
	bhs_test_geometry(2, 3, 4);
	r = bh_shm_open(NAME, &creator_cfg, BH_SHM_CREATE | BH_SHM_EXCL, &bh);
	if (r < 0)
		fail("cannot create the template", r);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		fail("cannot read the template", -errno);
	tmpl_size = (size_t)st.st_size;
	tmpl = malloc(tmpl_size);
	if (!tmpl || pread(fd, tmpl, tmpl_size, 0) != (ssize_t)tmpl_size)
		fail("cannot read the template", -EIO);
	close(fd);
	bh_destroy(bh);
	bh_shm_unlink(NAME);
}

/* FNV-1a 64 over the header up to its checksum, as the format says. */
static void fix_checksum(uint8_t *file, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t n = offsetof(struct bhs_hdr, checksum);

	if (len < sizeof(struct bhs_hdr))
		return;
	for (size_t i = 0; i < n; i++) {
		h ^= file[i];
		h *= 0x100000001b3ull;
	}
	memcpy(file + n, &h, sizeof(h));
}

static void write_file(const uint8_t *file, size_t len)
{
	int fd;

	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || (len && write(fd, file, len) != (ssize_t)len))
		fail("cannot write the segment file", -errno);
	close(fd);
}

static bool an_errno(int r)
{
	return r < 0 && r > -4096;
}

/* What a caller would do with a segment it attached to. */
static void use(bulkhead_t *bh)
{
	struct bh_stats st;
	int r;

	r = bh_try_acquire(bh, 1);
	if (r == 0) {
		r = bh_release(bh, 1);
		if (r != 0 && !an_errno(r))
			fail("bh_release returned neither 0 nor an errno", r);
	} else if (!an_errno(r)) {
		fail("bh_try_acquire returned neither 0 nor an errno", r);
	}
	bhs_scan_now(bh);
	r = bh_stats(bh, &st);
	if (r != 0 && !an_errno(r))
		fail("bh_stats returned neither 0 nor an errno", r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct bh_config other_cfg = { .max_concurrent = LIMIT + 1 };
	const struct bh_config *cfgs[4] = { NULL, &creator_cfg, &other_cfg, NULL };
	const struct bh_config *cfg;
	uint8_t mode, *file;
	size_t len, cut, edits = 0;
	bulkhead_t *bh = NULL;
	int r;

	if (!tmpl)
		setup();
	if (size == 0)
		return 0;
	mode = data[0];
	cfg = cfgs[(mode >> 4) & 3];
	if (!(mode & 1)) {
		len = size - 1;
		file = malloc(len + 1);
		if (!file)
			return 0;
		memcpy(file, data + 1, len);
	} else {
		size_t hdr_area = sizeof(struct bhs_seg) < tmpl_size ? sizeof(struct bhs_seg) : tmpl_size;

		len = tmpl_size;
		file = malloc(len + 4096);
		if (!file)
			return 0;
		memcpy(file, tmpl, len);
		cut = size >= 3 ? (size_t)data[1] | (size_t)data[2] << 8 : 0;
		for (size_t i = 3; i + 2 < size; i += 3, edits++) {
			size_t off = (size_t)data[i] | (size_t)data[i + 1] << 8;

			off = off & 0x8000 ? (off & 0x7fff) % len : off % hdr_area;
			file[off] = data[i + 2];
		}
		if (mode & 2)
			fix_checksum(file, len);
		switch ((mode >> 2) & 3) {
		case 1:
			len = cut % len;
			break;
		case 2:
			memset(file + len, 0, 4096);
			len += 4096;
			break;
		case 3:
			len--;
			break;
		}
	}
	write_file(file, len);
	free(file);
	r = bh_shm_open(NAME, cfg, 0, &bh);
	if (r != 0 && !an_errno(r))
		fail("bh_shm_open returned neither 0 nor an errno", r);
	if (r == 0 && !bh)
		fail("bh_shm_open returned 0 without a handle", r);
	if ((mode & 0x0d) == 1 && edits == 0 && cfg != &other_cfg && r != 0)
		fail("the unchanged template does not attach", r);
	if ((mode & 0x0d) == 1 && edits == 0 && cfg == &other_cfg && r == 0)
		fail("a cfg unlike the creator's was accepted", r);
	if (r == 0) {
		use(bh);
		bh_destroy(bh);
	}
	unlink(path);
	return 0;
}

/* Seeds: the template as it is, with each kind of damage. */
#define SEED(name, s) { name, (const uint8_t *)(s), sizeof(s) - 1 }

const struct bhf_seed bhf_seeds[] = {
	SEED("template", "\x01"),
	SEED("template-cfg", "\x11"),
	SEED("template-other-cfg", "\x21"),
	SEED("short", "\x05\x10\x00"),
	SEED("short-checksummed", "\x07\x00\x01"),
	SEED("long", "\x09\x00\x00"),
	SEED("one-short", "\x0d\x00\x00"),
	SEED("bad-magic", "\x01\x00\x00\x00\x00\x00"),
	SEED("bad-layout", "\x03\x00\x00\x08\x00\x07"),
	SEED("bad-nprocs", "\x03\x00\x00\x18\x00\xff"),
	SEED("bad-offsets", "\x03\x00\x00\x28\x00\x01"),
	SEED("bad-limit", "\x03\x00\x00\x40\x00\x00"),
	SEED("bad-name", "\x03\x00\x00\x68\x00\x41"),
	SEED("bad-word", "\x03\x00\x00\xc7\x00\xff"),
	SEED("bad-lock", "\x03\x00\x00\x00\x01\x09"),
	SEED("frozen-word", "\x03\x00\x00\xc7\x00\x10"), /* hung a try once */
	SEED("damaged-body", "\x03\x00\x00\x00\x81\xff\x00\x85\x01\x40\x88\xff"),
	SEED("raw-magic", "\x00" "bulkSHM1"),
	SEED("raw-empty", "\x00"),
};
const unsigned bhf_nseeds = sizeof(bhf_seeds) / sizeof(bhf_seeds[0]);
