/* Shared by the command-line fuzz harnesses, which include a tool's own
 * source (its flag parser is static) with exit() turned into a jump back
 * to the harness, and stdout/stderr captured. Include after the system
 * headers the tool uses and before the tool's source. */
#ifndef BH_FUZZ_FLAGS_COMMON_H
#define BH_FUZZ_FLAGS_COMMON_H

#include <getopt.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BHF_MAX_ARGS 24

static jmp_buf bhf_escape;

/* The tool's exit(): back to the harness with the status (+1, so that a
 * status of 0 is told from the first return of setjmp). */
__attribute__((noreturn)) static void bhf_exit(int status)
{
	longjmp(bhf_escape, status + 1);
}
#define exit(status) bhf_exit(status)

struct bhf_argv {
	int argc;
	char *argv[BHF_MAX_ARGS + 2];
};

/* Split the input at NUL bytes into arguments after argv[0]; each is its
 * own allocation, so a read past one's end is caught. */
static inline void bhf_make_argv(struct bhf_argv *a, const char *prog, const uint8_t *data,
				 size_t size)
{
	size_t start = 0;

	memset(a, 0, sizeof(*a));
	a->argv[a->argc++] = strdup(prog);
	for (size_t i = 0; size > 0 && i <= size && a->argc <= BHF_MAX_ARGS; i++) {
		if (i < size && data[i] != '\0')
			continue;
		char *s = malloc(i - start + 1);

		if (!s)
			abort();
		memcpy(s, data + start, i - start);
		s[i - start] = '\0';
		a->argv[a->argc++] = s;
		start = i + 1;
		if (i == size)
			break;
	}
	a->argv[a->argc] = NULL;
}

/* getopt_long permutes argv: free from a copy of the pointers. */
static inline void bhf_free_argv(struct bhf_argv *a, char **orig)
{
	for (int i = 0; i < a->argc; i++)
		free(orig[i]);
}

/* The tool's output: stdout discarded, stderr kept to check its form. */
struct bhf_capture {
	FILE *out, *err, *saved_out, *saved_err;
	char *text;
	size_t len;
};

static inline void bhf_capture_begin(struct bhf_capture *c)
{
	static FILE *devnull;

	if (!devnull && !(devnull = fopen("/dev/null", "w")))
		abort();
	c->text = NULL;
	c->len = 0;
	c->err = open_memstream(&c->text, &c->len);
	if (!c->err)
		abort();
	c->saved_out = stdout;
	c->saved_err = stderr;
	stdout = devnull;
	stderr = c->err;
}

static inline void bhf_capture_end(struct bhf_capture *c)
{
	stdout = c->saved_out;
	stderr = c->saved_err;
	fclose(c->err);
}

__attribute__((noreturn, format(printf, 3, 4))) static void
bhf_fail(const struct bhf_argv *a, const char *output, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "bhfuzz: %s mishandles its command line:", a->argv[0]);
	for (int i = 1; i < a->argc; i++)
		fprintf(stderr, " '%s'", a->argv[i]);
	fprintf(stderr, "\nbhfuzz: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nbhfuzz: its output was: %s\n", output ? output : "(none)");
	abort();
}

/* A refusal is exit status 2 and "prog: ..." then the --help hint. */
static inline void bhf_check_refusal(const struct bhf_argv *a, const char *prog, int status,
				     const char *err)
{
	char hint[96];

	snprintf(hint, sizeof(hint), "\nTry '%s --help' for more information.\n", prog);
	if (status == 0)
		return; /* --help: usage on stdout */
	if (status != 2)
		bhf_fail(a, err, "exit status %d, not 2", status);
	if (strncmp(err, prog, strlen(prog)) != 0 || strncmp(err + strlen(prog), ": ", 2) != 0)
		bhf_fail(a, err, "the message does not start with '%s: '", prog);
	if (strlen(err) < strlen(hint) || strcmp(err + strlen(err) - strlen(hint), hint) != 0)
		bhf_fail(a, err, "the message does not end with the --help hint");
}

#endif /* BH_FUZZ_FLAGS_COMMON_H */
