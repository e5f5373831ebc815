// The control protocol is spoken in JSON: whoever imports NetLifeControl (netlifectl, the daemon's control
// server, the tests that drive netlifectl) reads and writes the values, so the JSON module comes with it.

@_exported import NetLifeJSON
