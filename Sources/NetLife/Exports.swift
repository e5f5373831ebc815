// An app author imports NetLife alone: the event-loop types it speaks in (EventLoop, Connection,
// EventBuffer, SocketAddress, ...) and the lifecycle's vocabulary and status records (AppState, AppStatus, ...)
// come with it.

@_exported import NetLifeEvent
@_exported import NetLifeStatus
