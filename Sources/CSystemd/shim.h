// libsystemd's journal API (sd_journal_sendv): netlifed writes its log records to journald with their own
// fields (NETLIFE_APP, ...) when its stderr is the journal's stream. Debian: libsystemd-dev.
#include <systemd/sd-journal.h>
