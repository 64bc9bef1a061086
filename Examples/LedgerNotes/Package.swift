// swift-tools-version:6.0
import PackageDescription

// A notes app that owns its SQLite table, synced by a `Ledger` beside it.
let package = Package(
    name: "LedgerNotes",
    dependencies: [.package(name: "Stele", path: "../..")],
    targets: [
        .executableTarget(name: "ledger-notes", dependencies: [.product(name: "Stele", package: "Stele")]),
    ],
    swiftLanguageModes: [.v6]
)
