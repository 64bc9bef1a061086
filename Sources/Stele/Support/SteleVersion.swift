/// This build's version, as `stele --version` and `stele-hub --version` print it.
/// Stele has had no release yet (CHANGELOG.md): `main` is the next one in the
/// making, so the number says so (Semantic Versioning 2.0.0 §9, a pre-release).
public enum SteleVersion {
    public static let current = "0.1.0-dev"
}
