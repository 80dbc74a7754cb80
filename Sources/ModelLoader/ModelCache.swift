import BundleFormat

/// Opened bundles kept within a memory budget: see `ResourceCache`. A bundle's
/// bytes are its `ModelBundle.residentBytes` (the mapped weight file and the
/// other files).
public typealias ModelCache = ResourceCache<ModelBundle, BundleError>

/// A bundle handed out by a `ModelCache`; see `ResourceLease`.
public typealias ModelLease = ResourceLease<ModelBundle>

extension ModelBundle: CachedResource {}

extension ResourceCache where Resource == ModelBundle, Failure == BundleError {
    /// A cache of at most `budget` bytes of unleased bundles, opened with
    /// `ModelBundle.open`.
    public convenience init(budget: Int) {
        self.init(budget: budget) { path throws(BundleError) in try ModelBundle.open(path) }
    }
}
