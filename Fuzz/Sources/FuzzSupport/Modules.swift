// The modules the fuzz targets exercise, imported once here and re-exported, so that a type moving to
// another module changes this file (and the dependencies in Package.swift) only.

@_exported import NetLife
@_exported import NetLifeControl        // ControlRequest, StatusReply, WatchEvent
@_exported import NetLifeJSON           // JSON
@_exported import NetLifeDaemon         // ConfigLoader
@_exported import NetLifeServices       // ServiceRegistry.builtin (built as a dependency of NetLifeDaemon)
