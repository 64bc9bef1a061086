// swift-tools-version:6.0
import PackageDescription

// Two devices of one account in one process, over the in-memory environment.
let package = Package(
    name: "TwoDevices",
    dependencies: [.package(name: "Stele", path: "../..")],
    targets: [
        .executableTarget(name: "two-devices", dependencies: [.product(name: "Stele", package: "Stele")]),
    ],
    swiftLanguageModes: [.v6]
)
