// swift-tools-version:6.0
// netlife: iOS multitasking discipline for Linux network services, on libevent.
import PackageDescription

// Release builds skip the run-time exclusivity checks (about 80 instructions per access; a fifth of what a
// lifecycle transition with 1,000 listeners executed). Debug builds, and so every test run, keep them.
let release: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "netlife",
    products: [
        .library(name: "NetLife", targets: ["NetLife"]),
        .library(name: "NetLifeServices", targets: ["NetLifeServices"]),
        .library(name: "NetLifeJSON", targets: ["NetLifeJSON"]),
        .library(name: "NetLifeStatus", targets: ["NetLifeStatus"]),
        .library(name: "NetLifeControl", targets: ["NetLifeControl"]),
        .library(name: "NetLifeDaemon", targets: ["NetLifeDaemon"]),
        .executable(name: "netlifed", targets: ["netlifed"]),
        .executable(name: "netlifectl", targets: ["netlifectl"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLibevent",
            pkgConfig: "libevent",
            providers: [.apt(["libevent-dev"])]
        ),
        .systemLibrary(
            name: "CAvahi",
            // No pkgConfig: its flags carry -D_REENTRANT, which SwiftPM drops with a warning on every build;
            // the headers are in the default include path and module.modulemap names the libraries.
            providers: [.apt(["libavahi-client-dev"])]
        ),
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        // libcurl: downloads and uploads (http, https, ftp, ftps) on its multi-socket interface, driven by
        // the event loop.
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .target(name: "NetLifeEvent", dependencies: ["CLibevent"], swiftSettings: release),
        // JSON values, parser and serializer, and records whose members are declared once: a leaf that the
        // control protocol, the journals and the process apps' lifecycle channel all speak.
        .target(name: "NetLifeJSON", swiftSettings: release),
        // What `status` and `watch` report, typed once: the lifecycle's vocabulary (states, stages, modes,
        // policies) and the status records. The framework fills them in, netlifectl reads the same types back.
        .target(name: "NetLifeStatus", dependencies: ["NetLifeJSON"], swiftSettings: release),
        // The logger writes structured records to journald through libsystemd (sd_journal_sendv).
        .target(name: "NetLife", dependencies: ["NetLifeEvent", "NetLifeJSON", "NetLifeStatus", "CSystemd"], swiftSettings: release),
        .target(name: "NetLifeServices", dependencies: ["NetLife", "COpenSSL", "CCurl"], swiftSettings: release),
        .target(name: "NetLifeControl", dependencies: ["NetLifeJSON", "NetLifeStatus"], swiftSettings: release),
        .target(name: "NetLifeDaemon", dependencies: ["NetLife", "NetLifeServices", "NetLifeControl", "CAvahi"], swiftSettings: release),
        .executableTarget(name: "netlifed", dependencies: ["NetLifeDaemon"], swiftSettings: release),
        // netlifectl links the protocol (and the JSON under it) alone: no event loop, no framework.
        .executableTarget(name: "netlifectl", dependencies: ["NetLifeControl"]),

        // What the test targets share: running a loop until a condition holds, socket pairs, temporary
        // directories, the daemon harness, test peers and servers, process helpers. A plain target, so the
        // tests can import it. Its files are compiled only where Swift Testing can be imported (a test build);
        // elsewhere (`swift build -c release`) the module is empty and the build does not need Testing.
        .target(name: "NetLifeTestSupport", dependencies: ["NetLifeEvent"], path: "Tests/NetLifeTestSupport"),
        .testTarget(name: "NetLifeEventTests", dependencies: ["NetLifeEvent", "NetLifeTestSupport"]),
        .testTarget(name: "NetLifeTests", dependencies: ["NetLife", "NetLifeTestSupport"]),
        .testTarget(name: "NetLifeServicesTests", dependencies: ["NetLifeServices", "NetLifeTestSupport"]),
        .testTarget(name: "NetLifeJSONTests", dependencies: ["NetLifeJSON"]),
        .testTarget(name: "NetLifeStatusTests", dependencies: ["NetLifeStatus"]),
        .testTarget(name: "NetLifeControlTests", dependencies: ["NetLifeControl"]),
        .testTarget(name: "NetLifeDaemonTests", dependencies: ["NetLifeDaemon", "NetLifeTestSupport"]),
        // The integration tests run the built netlifed and netlifectl, which these dependencies build first,
        // and check the pages against netlifectl's command table and the daemon's config key table.
        .testTarget(name: "IntegrationTests", dependencies: ["netlifed", "netlifectl", "NetLifeControl", "NetLifeDaemon", "NetLifeServices",
                                                             "NetLifeTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
