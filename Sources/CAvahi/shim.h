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

// avahi_entry_group_add_service is variadic, which Swift cannot call; AVAHI_IF_UNSPEC and the
// AVAHI_PROTO_* values are anonymous enum constants. A service is published on `interface` (an interface
// index, or -1 for every interface avahi-daemon serves) and `protocol` (4, 6, or 0 for both), in the
// default domain, for this host.
static inline int netlife_avahi_add_service(AvahiEntryGroup *group, int interface, int protocol, const char *name,
                                            const char *type, unsigned short port, AvahiStringList *txt) {
    AvahiIfIndex index = interface < 0 ? AVAHI_IF_UNSPEC : interface;
    AvahiProtocol family = protocol == 4 ? AVAHI_PROTO_INET : protocol == 6 ? AVAHI_PROTO_INET6 : AVAHI_PROTO_UNSPEC;
    return avahi_entry_group_add_service_strlst(group, index, family, 0, name, type, NULL, NULL, port, txt);
}

#endif
