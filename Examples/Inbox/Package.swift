// swift-tools-version:6.0
import PackageDescription

// A mail client's inbox as a mirror client of the hub's records (`MirrorStore`).
let package = Package(
    name: "Inbox",
    dependencies: [.package(name: "Stele", path: "../..")],
    targets: [
        .executableTarget(name: "inbox", dependencies: [.product(name: "Stele", package: "Stele")]),
    ],
    swiftLanguageModes: [.v6]
)
