// The control protocol is spoken in JSON and carries the status records: whoever imports NetLifeControl
// (netlifectl, the daemon's control server, the tests that drive netlifectl) reads and writes the values, so
// the JSON module and the status vocabulary come with it.

@_exported import NetLifeJSON
@_exported import NetLifeStatus
