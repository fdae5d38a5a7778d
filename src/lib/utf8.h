/* UTF-8 well-formedness, for the exports: Prometheus and JSON text must be
 * UTF-8, and one bad byte in one name would make a scraper refuse the whole
 * text, every other series with it. Private (bhi_); include it as
 * "lib/utf8.h". */
#ifndef BHI_UTF8_H
#define BHI_UTF8_H

#include <stddef.h>

/* Bytes in the well-formed UTF-8 sequence at s (1 to 4), or 0 where there is
 * none: a stray continuation byte, an overlong form, a surrogate, past
 * U+10FFFF, or a sequence cut short (a name cut to fit). Reads no further
 * than a NUL, which is no continuation byte. */
static inline size_t bhi_utf8_len(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	unsigned c = s[0], cp;
	size_t n;

	if (c < 0x80)
		return 1;
	if (c < 0xc2 || c > 0xf4)
		return 0;
	n = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
	cp = c & (0x7fu >> n);
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3fu);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return n;
}

/* The UTF-8 replacement character, U+FFFD, for a byte that is not UTF-8. */
#define BHI_UTF8_REPLACEMENT "\xef\xbf\xbd"

#endif /* BHI_UTF8_H */
