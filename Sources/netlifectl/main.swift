// netlifectl: the command-line client of netlifed's control socket. It links only NetLifeControl.
import Glibc

exit(ControlTool.main())
