// The streaming XML tokenizer on its own: the same events whichever way the body is cut into
// chunks, namespaces scoped per element, CDATA and references as text, and the refusals.

@testable import BackupStorage
import XCTest

final class XMLStreamTests: XCTestCase {
    private struct Recorder: XMLStreamHandler {
        var events: [String] = []
        var text: [UInt8] = []
        mutating func flush() {
            if !text.isEmpty { events.append("text " + String(decoding: text, as: UTF8.self)) }
            text = []
        }
        mutating func startElement(namespace: String, name: String) throws { flush(); events.append("<\(namespace) \(name)>") }
        mutating func endElement() throws { flush(); events.append("</>") }
        mutating func text(_ bytes: UnsafeRawBufferPointer) throws { text.append(contentsOf: bytes) }
    }

    private func events(_ xml: String, chunk: Int) throws -> [String] {
        var tokenizer = XMLTokenizer()
        var recorder = Recorder()
        let bytes = Array(xml.utf8)
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + chunk)
            try bytes[start..<end].withUnsafeBytes { try tokenizer.feed($0, &recorder) }
            start = end
        }
        try tokenizer.finish()
        return recorder.events
    }

    func testEventsAreTheSameWhereverTheBodyIsCut() throws {
        let xml = """
            \u{FEFF}<?xml version="1.0" encoding="UTF-8"?><!-- a -- comment > --><D:multistatus xmlns:D="DAV:" \
            a='x>"y'><D:response><D:href>/a&amp;b/&#x1F600;&#233;&lt;&gt;&quot;&apos;</D:href><x:p xmlns:x="urn:x" \
            xmlns:D="urn:other"><D:q/></x:p><?pi ?> ?><![CDATA[<raw>&amp;]]]]]><D:e\t/></D:response></D:multistatus>
            """
        let whole = try events(xml, chunk: xml.utf8.count)
        XCTAssertEqual(whole, [
            "<DAV: multistatus>", "<DAV: response>", "<DAV: href>", "text /a&b/😀é<>\"'", "</>",
            "<urn:x p>", "<urn:other q>", "</>", "</>", "text  ?><raw>&amp;]]]", "<DAV: e>", "</>", "</>", "</>",
        ])
        for chunk in [1, 2, 3, 7] {
            XCTAssertEqual(try events(xml, chunk: chunk), whole, "cut every \(chunk) bytes")
        }
    }

    func testDTDsUnknownEntitiesAndBrokenDocumentsAreRefused() {
        let refused = [
            "<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>": "DTD",
            "<a>&x;</a>": "predefined",
            "<a><b></a>": "closes",
            "<a>": "ended inside",
            "<p:a/>": "not declared",
            "": "no element",
            String(repeating: "<a>", count: 65) + String(repeating: "</a>", count: 65): "deeper",
            "<a b='" + String(repeating: "x", count: 70_000) + "'/>": "longer",
        ]
        for (xml, reason) in refused {
            for chunk in [1, 4096] {
                XCTAssertThrowsError(try events(xml, chunk: chunk), "\(xml.prefix(40))") { error in
                    XCTAssertTrue("\(error)".contains(reason), "\(xml.prefix(40)): \(error)")
                }
            }
        }
    }
}
