/* Crash points for the crash tests: built only into the test copy of the
 * layer (-DBHS_CRASH_POINTS). A process told to stop at a point announces
 * it on a pipe and waits there for its SIGKILL -- or, told to pause there,
 * until the test writes a byte to let it go on (bhs_pause_at). */
#include <unistd.h>

#include "hooks.h"
#include "seg.h"

static _Atomic int stop_at;
static _Atomic unsigned stop_count;
static int stop_fd = -1;
static int resume_fd = -1;

void bhs_crash_at(int p, unsigned count, int fd)
{
	stop_fd = fd;
	resume_fd = -1;
	atomic_store(&stop_count, count ? count : 1);
	atomic_store(&stop_at, p);
}

void bhs_pause_at(int p, unsigned count, int out, int in)
{
	bhs_crash_at(p, count, out);
	resume_fd = in;
}

void bhs_point(enum bhs_point p)
{
	char c = (char)p;

	if (atomic_load_explicit(&stop_at, memory_order_relaxed) != (int)p ||
	    atomic_fetch_sub(&stop_count, 1) != 1)
		return;
	if (write(stop_fd, &c, 1) < 0) {
		/* the test reads the pipe; nothing to do if it went away */
	}
	if (resume_fd >= 0 && read(resume_fd, &c, 1) == 1) {
		if (c) { /* the byte names the next point to pause at */
			atomic_store(&stop_count, 1);
			atomic_store(&stop_at, (int)c);
		}
		return;
	}
	for (;;)
		pause();
}
