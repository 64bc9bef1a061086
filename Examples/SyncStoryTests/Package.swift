// swift-tools-version:6.0
import PackageDescription

// An app's own tests telling sync stories in the deterministic simulator (`SteleSimulator`).
let package = Package(
    name: "SyncStoryTests",
    products: [.library(name: "SyncStories", targets: ["SyncStories"])],
    dependencies: [.package(name: "Stele", path: "../..")],
    targets: [
        // The app's code: here, only how it declares its notes and the stories it promises.
        .target(name: "SyncStories", dependencies: [.product(name: "Stele", package: "Stele")]),
        .testTarget(
            name: "SyncStoryExampleTests",
            dependencies: ["SyncStories", .product(name: "SteleSimulator", package: "Stele")]),
    ],
    swiftLanguageModes: [.v6]
)
