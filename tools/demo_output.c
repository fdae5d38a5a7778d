/* The demo's output files. They are opened before the run, so that a bad
 * --svg or --kv path costs nothing but its message, and written after it;
 * each failure is said once, by the function that saw it. */
#define _GNU_SOURCE /* strsignal */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "demo.h"

static int output_error(const struct demo_output *o, int err)
{
	fprintf(stderr, "%s: cannot write %s: %s\n", cli_prog, o->path, strerror(err));
	return -err;
}

int demo_output_open(struct demo_output *o, const char *path)
{
	o->path = path;
	o->f = NULL;
	if (!path || !*path)
		return 0;
	o->f = fopen(path, "w");
	return o->f ? 0 : output_error(o, errno);
}

int demo_output_close(struct demo_output *o)
{
	/* A write that failed earlier left only its flag; fclose's errno is
	 * its own (a full disk usually shows at the last flush). */
	int err = o->f && ferror(o->f) ? EIO : 0;

	if (!o->f)
		return 0;
	if (fclose(o->f) != 0 && !err)
		err = errno ? errno : EIO;
	o->f = NULL;
	return err ? output_error(o, err) : 0;
}

void demo_output_discard(struct demo_output *o)
{
	struct stat st;
	bool created = o->f && fstat(fileno(o->f), &st) == 0 && S_ISREG(st.st_mode) &&
		       ftell(o->f) == 0;

	if (!o->f)
		return;
	fclose(o->f);
	o->f = NULL;
	if (created)
		unlink(o->path);
}

const char *demo_stop_note(const char *run, double stopped_s, char *buf, size_t len)
{
	int sig = demo_stop_signal();

	snprintf(buf, len, "%s stopped at %.2f s by %s", run, stopped_s,
		 sig ? strsignal(sig) : "a stop signal");
	return buf;
}
