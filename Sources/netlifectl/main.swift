// netlifectl: the command-line client of netlifed's control socket. Everything is in NetLifeDaemon.
import Glibc
import NetLifeDaemon

exit(ControlTool.main())
