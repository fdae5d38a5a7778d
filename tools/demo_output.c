/* The demo's output files. They are opened before the run, so that a bad
 * --svg or --kv path costs nothing but its message, and written after it;
 * each failure is said once, by the function that saw it. */
#define _GNU_SOURCE /* strsignal */
#include <errno.h>
#include <fcntl.h>
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

/* An existing file is opened without truncating it: until the run has
 * written its output, the file is as it was, so a run that never writes
 * (a bad path for the other file, a failure, a stop before the end) leaves
 * it alone. The close cuts what is left of the old content. */
int demo_output_open(struct demo_output *o, const char *path)
{
	int fd;

	o->path = path;
	o->f = NULL;
	o->created = false;
	if (!path || !*path)
		return 0;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (fd >= 0)
		o->created = true;
	else if (errno == EEXIST)
		fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) { /* a dangling symbolic link: create its target */
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
		o->created = fd >= 0;
	}
	if (fd < 0)
		return output_error(o, errno);
	o->f = fdopen(fd, "w");
	if (!o->f) {
		int err = errno;

		close(fd);
		if (o->created)
			unlink(path);
		return output_error(o, err);
	}
	return 0;
}

int demo_output_close(struct demo_output *o)
{
	/* A write that failed earlier left only its flag; fclose's errno is
	 * its own (a full disk usually shows at the last flush). */
	int err = o->f && ferror(o->f) ? EIO : 0;
	struct stat st;

	if (!o->f)
		return 0;
	/* The old content past what the run wrote goes; a pipe or a device
	 * has none. */
	if (!err && fflush(o->f) != 0)
		err = errno ? errno : EIO;
	if (!err && fstat(fileno(o->f), &st) == 0 && S_ISREG(st.st_mode) &&
	    ftruncate(fileno(o->f), ftello(o->f)) != 0)
		err = errno;
	if (fclose(o->f) != 0 && !err)
		err = errno ? errno : EIO;
	o->f = NULL;
	return err ? output_error(o, err) : 0;
}

void demo_output_discard(struct demo_output *o)
{
	bool unwritten = o->f && o->created && ftello(o->f) == 0;

	if (!o->f)
		return;
	fclose(o->f);
	o->f = NULL;
	if (unwritten)
		unlink(o->path);
}

const char *demo_stop_note(const char *run, double stopped_s, char *buf, size_t len)
{
	int sig = demo_stop_signal();

	snprintf(buf, len, "%s stopped at %.2f s by %s", run, stopped_s,
		 sig ? strsignal(sig) : "a stop signal");
	return buf;
}
