// swift-tools-version:6.0
import PackageDescription

// Layering follows DESIGN.md §3: C shims → SteleSQL → Stele → tools.
// Only the toolchain and Debian C libraries; no outside Swift packages.
let package = Package(
    name: "Stele",
    // Apple platforms take CryptoKit and the SDK's SQLite and zlib (README "Platforms");
    // Synchronization's Mutex sets the floor.
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "Stele", targets: ["Stele"]),
        .library(name: "SteleSQL", targets: ["SteleSQL"]),
        // The simulator, for apps that write their own sync stories as tests (README "Telling a sync story").
        .library(name: "SteleSimulator", targets: ["SteleSimulator"]),
        .executable(name: "stele", targets: ["stele"]),
        .executable(name: "stele-hub", targets: ["stele-hub"]),
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
        // The hub's C libraries; only SteleHubPostgres and SteleHubServer link them, never `stele`.
        .systemLibrary(
            name: "CPostgres",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        .target(name: "SteleSQL", dependencies: ["CSQLite"]),
        // libcrypto where CryptoKit is missing; CryptoKit on Apple platforms (Sources/Stele/Crypto).
        .target(
            name: "Stele",
            dependencies: ["SteleSQL", .target(name: "CCrypto", condition: .when(platforms: [.linux, .android, .windows, .openbsd])), "CZlib"]),
        .target(name: "SteleSimulator", dependencies: ["Stele", "SteleSQL", "SteleHub"]),
        .target(name: "SteleBench", dependencies: ["Stele", "SteleSQL", "SteleSimulator"]),
        .executableTarget(name: "stele", dependencies: ["Stele", "SteleSQL", "SteleSimulator", "SteleBench"]),
        // The hub (DESIGN §8.1, HUB-API.md): request handling as plain code over a storage, then the HTTP front.
        .target(name: "SteleHub", dependencies: ["Stele", "SteleSQL"]),
        // The hub's PostgreSQL storage, apart so that the simulator (and `stele simulate`) runs the hub without libpq.
        .target(name: "SteleHubPostgres", dependencies: ["SteleHub", "SteleSQL", "CPostgres"]),
        .target(name: "SteleHubServer", dependencies: ["SteleHub", "CMicroHTTPD"]),
        .executableTarget(name: "stele-hub", dependencies: ["SteleHub", "SteleHubPostgres", "SteleHubServer", "Stele", "SteleBench"]),
        // libFuzzer target for the frame decoder: swift build -c release --sanitize=fuzzer --product stele-fuzz-frames
        .executableTarget(name: "stele-fuzz-frames", dependencies: ["Stele"]),
        // libFuzzer target for the sealed-frame opener: swift build -c release --sanitize=fuzzer --product stele-fuzz-sealed
        .executableTarget(name: "stele-fuzz-sealed", dependencies: ["Stele"]),
        // libFuzzer target for the hub's request handler: swift build -c release --sanitize=fuzzer --product stele-fuzz-hub
        .executableTarget(name: "stele-fuzz-hub", dependencies: ["SteleHub", "Stele"]),
        .target(name: "TestSupport", dependencies: ["Stele", "SteleSQL"]),
        .testTarget(name: "SteleSQLTests", dependencies: ["SteleSQL", "TestSupport"]),
        .testTarget(name: "SteleTests", dependencies: ["Stele", "SteleSQL", "TestSupport"]),
        .testTarget(name: "SteleSimulatorTests", dependencies: ["SteleSimulator", "TestSupport"]),
        .testTarget(name: "SteleCLITests", dependencies: ["stele", "SteleBench", "TestSupport"]),
        // Real `stele` and `stele-hub` processes on loopback: the devices' story end to end.
        .testTarget(name: "SteleEndToEndTests", dependencies: ["stele", "stele-hub", "Stele", "SteleSQL", "TestSupport"]),
        // The pages stand alone and cannot drift: docs/scenarios.md against the grammar, links, README code quoted from Examples/.
        .testTarget(name: "DocumentationTests", dependencies: ["SteleSimulator"]),
        .testTarget(name: "SteleHubTests", dependencies: ["SteleHub", "SteleHubPostgres", "SteleHubServer", "stele-hub", "Stele", "SteleSQL", "TestSupport"]),
        // The examples: each is a package of its own under Examples/ that depends on this one by
        // path, and is built here too, from the same sources, so one build of Stele compiles them
        // all (scripts/test runs two of them; the README's Swift blocks are quoted from them).
        .executableTarget(name: "first-store", dependencies: ["Stele"], path: "Examples/FirstStore/Sources/first-store"),
        .executableTarget(name: "two-devices", dependencies: ["Stele"], path: "Examples/TwoDevices/Sources/two-devices"),
        .executableTarget(name: "hub-device", dependencies: ["Stele"], path: "Examples/HubDevices/Sources/hub-device"),
        .executableTarget(name: "inbox", dependencies: ["Stele"], path: "Examples/Inbox/Sources/inbox"),
        .executableTarget(name: "ledger-notes", dependencies: ["Stele"], path: "Examples/LedgerNotes/Sources/ledger-notes"),
        .target(name: "SyncStories", dependencies: ["Stele"], path: "Examples/SyncStoryTests/Sources/SyncStories"),
        .testTarget(name: "SyncStoryExampleTests", dependencies: ["SyncStories", "SteleSimulator"], path: "Examples/SyncStoryTests/Tests/SyncStoryExampleTests"),
    ],
    swiftLanguageModes: [.v6]
)
