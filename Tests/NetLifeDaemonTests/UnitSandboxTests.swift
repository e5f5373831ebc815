// What --check-config knows of the unit that runs the config: its writable places under ProtectSystem=strict.

@testable import NetLifeDaemon
import Testing

@Suite struct UnitSandboxTests {
    static let shown = """
        ExecStart={ path=/usr/bin/netlifed ; argv[]=/usr/bin/netlifed --config /etc/netlifed/netlifed.conf ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }
        ProtectSystem=strict
        ReadWritePaths=-/var/log/netlife /srv/incoming
        StateDirectory=netlifed
        RuntimeDirectory=netlifed
        LogsDirectory=
        CacheDirectory=
        ConfigurationDirectory=
        PrivateTmp=yes
        """

    @Test func theUnitsWritablePlacesAreItsOwnDirectoriesAndReadWritePaths() throws {
        let sandbox = try #require(UnitSandbox.of(unit: "netlifed.service", properties: Self.shown, configPath: "/etc/netlifed/netlifed.conf"))
        #expect(sandbox.writable == ["/var/log/netlife", "/srv/incoming", "/var/lib/netlifed", "/run/netlifed", "/tmp", "/var/tmp"])
        for writable in ["/var/log/netlife", "/srv/incoming/a", "/var/lib/netlifed/uploads"] {
            #expect(sandbox.refusal(writable) == nil, "\(writable)")
        }
        #expect(sandbox.refusal("/srv/logs") == "/srv/logs is read-only under netlifed.service (ProtectSystem=strict): a drop-in (systemctl edit netlifed.service) with ReadWritePaths=/srv/logs makes it writable")
        #expect(sandbox.refusal("/srv/incomingX") != nil, "a prefix of a name is not the directory")
    }

    @Test func onlyTheUnitThatRunsTheCheckedFileWithAReadOnlySystemCounts() {
        #expect(UnitSandbox.of(unit: "netlifed.service", properties: Self.shown, configPath: "/tmp/other.conf") == nil)
        #expect(UnitSandbox.of(unit: "netlifed.service", properties: Self.shown.replacingOccurrences(of: "ProtectSystem=strict", with: "ProtectSystem=full"),
                               configPath: "/etc/netlifed/netlifed.conf") == nil)
    }
}
