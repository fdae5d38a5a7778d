/* The machine a benchmark ran on, printed as its first line: a figure means
 * little without the CPU it was measured on (a fast path tuned to one
 * microarchitecture can lose on the next), and the ratios move with the
 * vendor, family and model, the number of CPUs and the kernel.
 *
 *   machine: AMD EPYC 9R45 (AuthenticAMD family 26 model 2), 2 online CPUs,
 *            2 usable, Linux 6.1.0-27-cloud-amd64 x86_64
 *
 * From /proc/cpuinfo (the first processor's "model name", "vendor_id",
 * "cpu family" and "model"; on CPUs that name none of these, such as many
 * Arm kernels, "CPU implementer" and "CPU part" instead), sysconf and
 * uname. Header-only: each benchmark is one C file. */
#ifndef BENCH_MACHINE_H
#define BENCH_MACHINE_H

#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

struct bench_machine {
	char model[128];  /* "model name", or "unknown CPU" */
	char vendor[32];  /* "vendor_id" or "CPU implementer" */
	char family[16];  /* "cpu family" (x86) */
	char number[32];  /* "model" (x86) or "CPU part" */
	long online;      /* CPUs online */
	int usable;       /* CPUs this process may run on (its affinity mask) */
	char kernel[200]; /* uname: system, release, machine */
};

/* Copy the value of a "key<tabs>: value" line of /proc/cpuinfo into dst
 * when the line's key is key and dst is still empty. */
static inline void bench_cpuinfo_field(const char *line, const char *key, char *dst,
				       size_t size)
{
	size_t n = strlen(key);
	const char *v;

	if (dst[0] || strncmp(line, key, n) != 0)
		return;
	v = line + n + strspn(line + n, " \t"); /* "model" is not "model name" */
	if (*v != ':')
		return;
	v += 1 + strspn(v + 1, " \t");
	snprintf(dst, size, "%.*s", (int)strcspn(v, "\n"), v);
}

static inline void bench_machine_read(struct bench_machine *m)
{
	char line[512];
	unsigned long mask[1024 / (8 * sizeof(unsigned long))];
	struct utsname u;
	long bytes;
	FILE *f;

	memset(m, 0, sizeof(*m));
	f = fopen("/proc/cpuinfo", "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (line[0] == '\n' && m->model[0])
			break; /* the first processor is enough */
		bench_cpuinfo_field(line, "model name", m->model, sizeof(m->model));
		bench_cpuinfo_field(line, "vendor_id", m->vendor, sizeof(m->vendor));
		bench_cpuinfo_field(line, "CPU implementer", m->vendor, sizeof(m->vendor));
		bench_cpuinfo_field(line, "cpu family", m->family, sizeof(m->family));
		bench_cpuinfo_field(line, "model", m->number, sizeof(m->number));
		bench_cpuinfo_field(line, "CPU part", m->number, sizeof(m->number));
	}
	if (f)
		fclose(f);
	if (!m->model[0])
		snprintf(m->model, sizeof(m->model), "unknown CPU");
	m->online = sysconf(_SC_NPROCESSORS_ONLN);
	/* The raw call, which needs no _GNU_SOURCE: it returns the mask's size. */
	bytes = syscall(SYS_sched_getaffinity, 0, sizeof(mask), mask);
	m->usable = bytes > 0 ? 0 : -1;
	for (long i = 0; i < bytes / (long)sizeof(mask[0]); i++)
		m->usable += __builtin_popcountl(mask[i]);
	if (uname(&u) == 0)
		snprintf(m->kernel, sizeof(m->kernel), "%s %s %s", u.sysname, u.release,
			 u.machine);
	else
		snprintf(m->kernel, sizeof(m->kernel), "unknown kernel");
}

/* One line, "machine: ...", to f; benchmarks print it before anything else
 * (bench/run-all.sh reads it back for the table's heading). */
static inline void bench_print_machine(FILE *f)
{
	struct bench_machine m;

	bench_machine_read(&m);
	fprintf(f, "machine: %s (%s%s%s%s%s), %ld online CPUs, %d usable, %s\n", m.model,
		m.vendor[0] ? m.vendor : "vendor unknown", m.family[0] ? " family " : "",
		m.family, m.number[0] ? (m.family[0] ? " model " : " part ") : "", m.number,
		m.online, m.usable, m.kernel);
	fflush(f);
}

#endif
