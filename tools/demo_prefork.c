/* bulkhead-demo --scenario prefork: an order service of several worker
 * processes (as a pre-forking server runs: Gunicorn, PHP-FPM, Apache's
 * prefork MPM). A bulkhead in each process limits that process alone, so
 * payment sees processes x limit; one host-wide bulkhead (bh_shm_open)
 * limits them all together, and takes back the permits of a process that
 * is SIGKILLed while it holds them.
 *
 * The host-wide bulkhead lives in a private directory (BH_SHM_DIR, made
 * here and removed at the end), so no other program's bulkhead of the same
 * name is touched. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bulkhead/shm.h"
#include "cli.h"
#include "demo_procs.h"

int procs_open_shm(const struct procs_scenario *sc, const struct demo_config *cfg,
		   bulkhead_t **out)
{
	struct bh_config c = { .max_concurrent = cfg->conc[DEP_PAY] };

	return bh_shm_open(sc->shm_name, &c, BH_SHM_CREATE, out);
}

/* A directory of our own for the segment: on tmpfs when there is one. */
static int make_shm_dir(char *dir, size_t len)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

	snprintf(dir, len, "%s/bulkhead-demo-XXXXXX", base);
	if (!mkdtemp(dir))
		return -errno;
	return setenv("BH_SHM_DIR", dir, 1) < 0 ? -errno : 0;
}

int prefork_scenario(const struct demo_config *cfg, struct demo_outputs *out)
{
	struct procs_scenario sc = {
		.name = "prefork", .unit = "worker", .local_label = "a bulkhead per worker",
		.shared_label = "one host-wide bulkhead",
		.shared_mode = PM_SHM, .shm_name = "payment",
	};
	char dir[96];
	int r = make_shm_dir(dir, sizeof(dir)), u;

	if (r < 0) {
		fprintf(stderr, "%s: cannot make a directory for the host-wide bulkhead (%s): %s\n",
			cli_prog, dir, strerror(-r));
		return r;
	}
	r = procs_scenario_run(&sc, cfg, out);
	u = bh_shm_unlink(sc.shm_name);
	if (u < 0 && u != -ENOENT)
		fprintf(stderr, "%s: bh_shm_unlink %s: %s\n", cli_prog, sc.shm_name, strerror(-u));
	if (rmdir(dir) < 0)
		fprintf(stderr, "%s: rmdir %s: %s\n", cli_prog, dir, strerror(errno));
	return r;
}
