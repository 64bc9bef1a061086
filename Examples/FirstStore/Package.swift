// swift-tools-version:6.0
import PackageDescription

// One replica on its own: namespaces and their merge rules, Codable values, the change feed, messages.
let package = Package(
    name: "FirstStore",
    dependencies: [.package(name: "Stele", path: "../..")],
    targets: [
        .executableTarget(name: "first-store", dependencies: [.product(name: "Stele", package: "Stele")]),
    ],
    swiftLanguageModes: [.v6]
)
