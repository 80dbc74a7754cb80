import Testing
@testable import NameMatching

@Suite struct ClosestMatchTests {
    @Test func suggestionsOnlyForCloseWords() {
        #expect(closestMatch(to: "inspekt", among: ["inspect", "compile", "fetch"]) == "inspect")
        #expect(closestMatch(to: "comple", among: ["inspect", "compile", "fetch"]) == "compile")
        #expect(closestMatch(to: "xyz", among: ["inspect", "compile", "fetch"]) == nil)
        #expect(editDistance("kitten", "sitting") == 3)
        #expect(editDistance("", "abc") == 3)
    }

    @Test func didYouMeanEndsALineOrAddsNothing() {
        #expect(didYouMean("output") == "; did you mean 'output'?")
        #expect(didYouMean(nil) == "")
    }
}
