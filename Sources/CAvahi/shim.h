// Avahi's client library (mDNS service publishing over D-Bus), for the daemon's mDNS publisher.
// libc headers come first, as in CLibevent.
#ifndef NETLIFE_CAVAHI_SHIM_H
#define NETLIFE_CAVAHI_SHIM_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/time.h>
#include <poll.h>

#include <avahi-client/client.h>
#include <avahi-client/publish.h>
#include <avahi-common/alternative.h>
#include <avahi-common/error.h>
#include <avahi-common/malloc.h>
#include <avahi-common/strlst.h>
#include <avahi-common/watch.h>

// avahi_entry_group_add_service is variadic, which Swift cannot call; AVAHI_IF_UNSPEC and
// AVAHI_PROTO_UNSPEC are anonymous enum constants. A service is published on every interface and
// protocol avahi-daemon serves, in the default domain, for this host.
static inline int netlife_avahi_add_service(AvahiEntryGroup *group, const char *name, const char *type,
                                            unsigned short port, AvahiStringList *txt) {
    return avahi_entry_group_add_service_strlst(group, AVAHI_IF_UNSPEC, AVAHI_PROTO_UNSPEC, 0, name, type,
                                                NULL, NULL, port, txt);
}

#endif
