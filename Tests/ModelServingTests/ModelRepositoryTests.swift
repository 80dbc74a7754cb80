import FixtureSupport
import Foundation
import Testing
@testable import ModelServing

/// The repository finds models by name on every request: what is added or removed is seen at once,
/// whether the lookup is answered from the files or from what it remembered under the directory's stamp.
@Suite struct ModelRepositoryTests {
    static func age(_ directory: String, hours: Double) throws {
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -hours * 3600)], ofItemAtPath: directory)
    }

    @Test func modelsAddedAndRemovedAreSeenAtOnce() throws {
        let directory = try Fixtures.temporaryDirectory("repository").path
        let repository = try ModelRepository(directory: directory, compileCache: try Fixtures.temporaryDirectory("repository-cache").path)
        let base = repository.directory
        // A changed directory is looked at file by file; a settled one remembers what it found.
        for hours in [0, 1.0] {
            #expect(FileManager.default.createFile(atPath: "\(base)/A.mlmodel", contents: Data()))
            if hours > 0 { try Self.age(base, hours: hours) }
            #expect(repository.path(for: "A") == "\(base)/A.mlmodel")
            #expect(repository.path(for: "A") == "\(base)/A.mlmodel")
            try FileManager.default.createDirectory(atPath: "\(base)/A.mlmodelc", withIntermediateDirectories: false)
            #expect(repository.path(for: "A") == "\(base)/A.mlmodelc", "a bundle comes before a source model")
            if hours > 0 { try Self.age(base, hours: hours + 1) }
            #expect(repository.path(for: "A") == "\(base)/A.mlmodelc")
            try FileManager.default.removeItem(atPath: "\(base)/A.mlmodelc")
            #expect(repository.path(for: "A") == "\(base)/A.mlmodel")
            try FileManager.default.removeItem(atPath: "\(base)/A.mlmodel")
            #expect(repository.path(for: "A") == nil)
            #expect(repository.path(for: "B") == nil && repository.path(for: "../A") == nil && repository.path(for: "") == nil)
        }
    }

    @Test func aLookupUnderAnUnchangedStampIsAnsweredFromMemory() throws {
        let directory = try Fixtures.temporaryDirectory("repository-stamp").path
        let repository = try ModelRepository(directory: directory, compileCache: try Fixtures.temporaryDirectory("repository-cache").path)
        let base = repository.directory
        #expect(FileManager.default.createFile(atPath: "\(base)/A.mlmodel", contents: Data()))
        #expect(DirectoryStamp(of: base) == nil, "changed within the last second: not trusted yet")
        let settled = Date(timeIntervalSinceNow: -3600)
        try FileManager.default.setAttributes([.modificationDate: settled], ofItemAtPath: base)
        #expect(DirectoryStamp(of: base) != nil)
        #expect(repository.path(for: "A") == "\(base)/A.mlmodel")
        // Removed with the directory's time put back as it was: only the remembered answer can give it.
        try FileManager.default.removeItem(atPath: "\(base)/A.mlmodel")
        try FileManager.default.setAttributes([.modificationDate: settled], ofItemAtPath: base)
        #expect(repository.path(for: "A") == "\(base)/A.mlmodel")
        try Self.age(base, hours: 2)
        #expect(repository.path(for: "A") == nil)
    }
}
