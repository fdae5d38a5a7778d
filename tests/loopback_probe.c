/* loopback_probe: exit 0 when a TCP connection over 127.0.0.1 works here,
 * 77 (the test suite's "skip") when it does not - a build chroot or
 * container whose network namespace has its loopback interface down - after
 * saying why. Tests that talk over loopback run it first. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define SKIP 77

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	const char *step = "socket";
	int ls, c = -1, ok = 0;

	ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ls >= 0 && (step = "bind", bind(ls, (struct sockaddr *)&a, sizeof(a)) == 0) &&
	    (step = "listen", listen(ls, 1) == 0) &&
	    (step = "getsockname", getsockname(ls, (struct sockaddr *)&a, &len) == 0) &&
	    (step = "socket", (c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0) &&
	    (step = "connect", connect(c, (struct sockaddr *)&a, sizeof(a)) == 0))
		ok = 1;
	if (!ok)
		printf("no loopback here (%s to 127.0.0.1: %s): skip\n", step, strerror(errno));
	if (c >= 0)
		close(c);
	if (ls >= 0)
		close(ls);
	return ok ? 0 : SKIP;
}
