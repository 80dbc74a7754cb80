import Testing
@testable import ModelPictures

/// The graph page and the report pages open with one head: doctype, UTF-8, viewport, the
/// escaped title, then their own style.
@Suite struct PageHeadTests {
    static let title = "a<b & \"c\" 'd'"
    static let head = """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>a&lt;b &amp; &quot;c&quot; &#39;d&#39;</title>
        <style>

        """

    @Test func graphPage() {
        #expect(GraphPage.html(svg: "<svg></svg>", title: Self.title).hasPrefix(Self.head))
    }

    @Test func reportPage() {
        #expect(ReportPage.page(title: Self.title, subtitle: "s", body: "<p>b</p>").hasPrefix(Self.head))
    }
}
