// A small XML tree for the S3 responses (listing pages, capped at 8 MiB, and errors, at 64 KiB),
// built with FoundationXML's XMLParser with namespaces resolved. The WebDAV multistatus, whose
// size grows with the tree, is streamed instead (XMLStream.swift, WebDAVMultistatus.swift).

import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// One parsed XML element: its local name, namespace, text and child elements.
final class XMLElementNode {
    let name: String
    let namespace: String
    var text = ""
    var children: [XMLElementNode] = []

    init(name: String, namespace: String) {
        self.name = name
        self.namespace = namespace
    }

    /// The first child named `name` (in `namespace`, when given).
    func child(_ name: String, _ namespace: String? = nil) -> XMLElementNode? {
        children.first { $0.name == name && (namespace == nil || $0.namespace == namespace) }
    }

    /// Every child named `name` (in `namespace`, when given).
    func children(_ name: String, _ namespace: String? = nil) -> [XMLElementNode] {
        children.filter { $0.name == name && (namespace == nil || $0.namespace == namespace) }
    }

    /// The trimmed text of the first child named `name`.
    func text(of name: String, _ namespace: String? = nil) -> String? {
        child(name, namespace).map { $0.text.trimmingCharacters(in: .whitespacesAndNewlines) }
    }

    /// The text of the first child named `name`, exactly as sent: for values whose spaces
    /// are part of them, such as S3 keys (a name may begin or end with a space).
    func exactText(of name: String, _ namespace: String? = nil) -> String? {
        child(name, namespace)?.text
    }

    /// Parses `data`; nil when it is not well-formed XML, or declares a DTD or entities (never
    /// expanded: an entity bomb in a small body is refused before libxml2 sees it).
    static func parse(_ data: Data) -> XMLElementNode? {
        if data.range(of: Data("<!DOCTYPE".utf8)) != nil || data.range(of: Data("<!ENTITY".utf8)) != nil { return nil }
        let parser = XMLParser(data: data)
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        let builder = TreeBuilder()
        parser.delegate = builder
        guard parser.parse() else { return nil }
        return builder.root
    }
}

private final class TreeBuilder: NSObject, XMLParserDelegate {
    var root: XMLElementNode?
    private var stack: [XMLElementNode] = []

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                qualifiedName qName: String?, attributes attributeDict: [String: String] = [:]) {
        let node = XMLElementNode(name: elementName, namespace: namespaceURI ?? "")
        if let parent = stack.last { parent.children.append(node) } else { root = node }
        stack.append(node)
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?,
                qualifiedName qName: String?) {
        stack.removeLast()
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        stack.last?.text += string
    }

    func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) {
        stack.last?.text += String(decoding: CDATABlock, as: UTF8.self)
    }
}

/// Escapes text for an XML element's content or a double-quoted attribute.
func xmlEscaped(_ text: String) -> String {
    var out = ""
    out.reserveCapacity(text.utf8.count)
    for character in text.unicodeScalars {
        switch character {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&quot;"
        case "'": out += "&apos;"
        default: out.unicodeScalars.append(character)
        }
    }
    return out
}
