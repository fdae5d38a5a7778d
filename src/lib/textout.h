/* Text the exports write (the metrics exporter, the adaptive controllers'
 * families): into a caller's buffer, counting what would not fit, like
 * snprintf, or to a stream. Private (bhi_); include it as "lib/textout.h". */
#ifndef BHI_TEXTOUT_H
#define BHI_TEXTOUT_H

#include <stddef.h>
#include <stdio.h>

struct bhi_out {
	char *buf; /* with len: the caller's buffer, when f is NULL */
	size_t len, pos; /* pos: what was written, or would have been */
	FILE *f;
	int err; /* -EIO once a write to f failed */
};

void bhi_put(struct bhi_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A Prometheus label value: backslash, double quote and newline escaped;
 * a byte that is not UTF-8 becomes U+FFFD (lib/utf8.h says why). */
void bhi_put_label(struct bhi_out *o, const char *s);

#endif /* BHI_TEXTOUT_H */
