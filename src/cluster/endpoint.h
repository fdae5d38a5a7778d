/* Private to the cluster layer: where the store is and how to log in. */
#ifndef BHC_ENDPOINT_H
#define BHC_ENDPOINT_H

#include <stdbool.h>
#include <sys/un.h>

#define BHC_HOST_MAX 256
#define BHC_CRED_MAX 256

struct bhc_endpoint {
	bool is_unix;
	char host[BHC_HOST_MAX];                 /* TCP: name or address, no brackets */
	char port[8];                            /* TCP: decimal */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* unix */
	char user[BHC_CRED_MAX];                 /* ACL user ("" with password only) */
	char password[BHC_CRED_MAX];             /* "" = no AUTH */
	unsigned db;                             /* SELECT db when not 0 */
};

/*
 *   redis://[user[:password]@]host[:port][/db]     (port 6379, db 0)
 *   redis://:password@host...                      (password only)
 *   unix://[user[:password]@]/path[?db=N]
 * host may be [v6-address]; user and password may be %-encoded.
 * 0, -EINVAL (malformed), -ENAMETOOLONG, -EPROTONOSUPPORT (rediss://: TLS).
 * Nothing from s appears in anything returned.
 */
int bhc_endpoint_parse(const char *s, struct bhc_endpoint *ep);

/* Clear the credentials from memory. */
void bhc_endpoint_wipe(struct bhc_endpoint *ep);

#endif /* BHC_ENDPOINT_H */
