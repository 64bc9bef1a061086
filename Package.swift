// swift-tools-version:6.0
import PackageDescription

// Layering follows DESIGN.md §3: C shims → SteleSQL → Stele → tools.
// Only the toolchain and Debian C libraries; no outside Swift packages.
let package = Package(
    name: "Stele",
    products: [
        .library(name: "Stele", targets: ["Stele"]),
        .library(name: "SteleSQL", targets: ["SteleSQL"]),
        .executable(name: "stele", targets: ["stele"]),
    ],
    targets: [
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        .target(name: "SteleSQL", dependencies: ["CSQLite"]),
        .target(name: "Stele", dependencies: ["SteleSQL", "CCrypto", "CZlib"]),
        .target(name: "SteleSimulator", dependencies: ["Stele", "SteleSQL"]),
        .target(name: "SteleBench", dependencies: ["Stele", "SteleSQL", "SteleSimulator"]),
        .executableTarget(name: "stele", dependencies: ["Stele", "SteleSimulator", "SteleBench"]),
        // libFuzzer target for the frame decoder: swift build -c release --sanitize=fuzzer --product stele-fuzz-frames
        .executableTarget(name: "stele-fuzz-frames", dependencies: ["Stele"]),
        // libFuzzer target for the sealed-frame opener: swift build -c release --sanitize=fuzzer --product stele-fuzz-sealed
        .executableTarget(name: "stele-fuzz-sealed", dependencies: ["Stele"]),
        .target(name: "TestSupport", dependencies: ["Stele", "SteleSQL"]),
        .testTarget(name: "SteleSQLTests", dependencies: ["SteleSQL", "TestSupport"]),
        .testTarget(name: "SteleTests", dependencies: ["Stele", "SteleSQL", "TestSupport"]),
        .testTarget(name: "SteleSimulatorTests", dependencies: ["SteleSimulator", "TestSupport"]),
        .testTarget(name: "SteleCLITests", dependencies: ["stele", "SteleBench", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
