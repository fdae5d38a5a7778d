/* Runs a fuzz harness without libFuzzer: over its built-in seeds, then over
 * every file named on the command line (directories are read, one level).
 * With no arguments it replays the committed corpus (BHF_CORPUS), which is
 * how `make check` runs the harnesses. `--write-seeds DIR` writes the
 * built-in seeds as files, to start a corpus. Exits 1 on the first input
 * the harness rejects (it aborts, printing why). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_seeds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned replayed;

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, got;

	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	do {
		if (len == cap) {
			uint8_t *nb = realloc(buf, cap = cap ? 2 * cap : 4096);

			if (!nb) {
				fclose(f);
				free(buf);
				return -1;
			}
			buf = nb;
		}
		got = fread(buf + len, 1, cap - len, f);
		len += got;
	} while (got > 0);
	fclose(f);
	fprintf(stderr, "replay: %s\n", path);
	LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	replayed++;
	return 0;
}

static int compare(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory's files, in name order, so a run is repeatable. */
static int run_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0;
	int r = 0;

	if (!d)
		return run_file(dir);
	while ((e = readdir(d)) != NULL) {
		char **nn;

		if (e->d_name[0] == '.')
			continue;
		nn = realloc(names, (n + 1) * sizeof(*names));
		if (!nn)
			break;
		names = nn;
		names[n] = malloc(strlen(dir) + strlen(e->d_name) + 2);
		if (!names[n])
			break;
		sprintf(names[n++], "%s/%s", dir, e->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), compare);
	for (size_t i = 0; i < n; i++) {
		if (r == 0)
			r = run_file(names[i]);
		free(names[i]);
	}
	free(names);
	return r;
}

static int write_seeds(const char *dir)
{
	mkdir(dir, 0755);
	for (unsigned i = 0; i < bhf_nseeds; i++) {
		char path[4096];
		FILE *f;

		snprintf(path, sizeof(path), "%s/seed-%s", dir, bhf_seeds[i].name);
		f = fopen(path, "wb");
		if (!f || fwrite(bhf_seeds[i].data, 1, bhf_seeds[i].len, f) != bhf_seeds[i].len) {
			fprintf(stderr, "replay: cannot write %s\n", path);
			return 1;
		}
		fclose(f);
	}
	printf("wrote %u seeds to %s\n", bhf_nseeds, dir);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0)
		return write_seeds(argv[2]);
	for (unsigned i = 0; i < bhf_nseeds; i++) {
		fprintf(stderr, "replay: seed %s\n", bhf_seeds[i].name);
		LLVMFuzzerTestOneInput(bhf_seeds[i].data, bhf_seeds[i].len);
	}
	if (argc < 2) {
		if (run_dir(BHF_CORPUS) != 0)
			return 1;
	}
	for (int i = 1; i < argc; i++)
		if (run_dir(argv[i]) != 0)
			return 1;
	printf("replay: %u seeds and %u corpus inputs passed\n", bhf_nseeds, replayed);
	return 0;
}
