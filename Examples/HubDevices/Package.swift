// swift-tools-version:6.0
import PackageDescription

// One device process through a real hub (`stele-hub serve`), run once per device.
let package = Package(
    name: "HubDevices",
    dependencies: [.package(name: "Stele", path: "../..")],
    targets: [
        .executableTarget(name: "hub-device", dependencies: [.product(name: "Stele", package: "Stele")]),
    ],
    swiftLanguageModes: [.v6]
)
