// netlifed: the daemon. Everything is in NetLifeDaemon.
import Glibc
import NetLifeDaemon

exit(Daemon.main())
