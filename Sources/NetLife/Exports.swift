// An app author imports NetLife alone: the event-loop types it speaks in (EventLoop, Connection,
// EventBuffer, SocketAddress, ...) come with it.

@_exported import NetLifeEvent
