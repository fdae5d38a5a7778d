/* Text the exports write (lib/textout.h). */
#include <errno.h>
#include <stdarg.h>

#include "lib/textout.h"
#include "lib/utf8.h"

void bhi_put(struct bhi_out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	if (o->f) {
		if (vfprintf(o->f, fmt, ap) < 0)
			o->err = -EIO;
	} else {
		n = vsnprintf(o->pos < o->len ? o->buf + o->pos : NULL,
			      o->pos < o->len ? o->len - o->pos : 0, fmt, ap);
		if (n > 0)
			o->pos += (size_t)n;
	}
	va_end(ap);
}

void bhi_put_label(struct bhi_out *o, const char *s)
{
	while (*s) {
		size_t n = bhi_utf8_len(s);

		if (*s == '\\' || *s == '"')
			bhi_put(o, "\\%c", *s);
		else if (*s == '\n')
			bhi_put(o, "\\n");
		else if (n == 0)
			bhi_put(o, BHI_UTF8_REPLACEMENT);
		else
			bhi_put(o, "%.*s", (int)n, s);
		s += n ? n : 1;
	}
}
