// swift-tools-version:6.0
// libFuzzer targets for netlife's parsers of untrusted bytes, a package of their own so that the fuzzer's
// instrumentation and AddressSanitizer apply to every module without touching the main build. Build and run
// them with scripts/fuzz (see README.md), which builds with
//   swift build --package-path Fuzz -c release --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address
import PackageDescription

// A fuzz target is an executable whose entry point is libFuzzer's `main`; the Swift file only defines
// `LLVMFuzzerTestOneInput`, so it is compiled as a library file (no top-level code, no Swift `main`).
func fuzzTarget(_ name: String) -> Target {
    .executableTarget(name: name, dependencies: ["FuzzSupport"], swiftSettings: [.unsafeFlags(["-parse-as-library"])])
}

let package = Package(
    name: "netlife-fuzz",
    dependencies: [.package(name: "netlife", path: "..")],
    targets: [
        // The one place that names the modules under test (see Sources/FuzzSupport/Modules.swift).
        .target(
            name: "FuzzSupport",
            dependencies: [
                .product(name: "NetLife", package: "netlife"),
                .product(name: "NetLifeJSON", package: "netlife"),
                .product(name: "NetLifeControl", package: "netlife"),
                .product(name: "NetLifeDaemon", package: "netlife"),
            ]
        ),
        fuzzTarget("fuzz-json"),
        fuzzTarget("fuzz-config"),
        fuzzTarget("fuzz-imap"),
        fuzzTarget("fuzz-line"),
        fuzzTarget("fuzz-http"),
        fuzzTarget("fuzz-download"),
        fuzzTarget("fuzz-lifecycle"),
        fuzzTarget("fuzz-channel"),
        fuzzTarget("fuzz-notify"),
    ],
    swiftLanguageModes: [.v6]
)
