// swift-tools-version:6.0
// An example of an app written in Swift on netlife's public API, run in its own daemon executable.
import PackageDescription

let package = Package(
    name: "netlife-examples",
    dependencies: [.package(name: "netlife", path: "..")],
    targets: [
        .executableTarget(
            name: "reporterd",
            dependencies: [
                .product(name: "NetLife", package: "netlife"),
                .product(name: "NetLifeDaemon", package: "netlife"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
