// Parsing argv against the command tree. Every mistake is a usage error (exit 2) that names
// the option or word and points at the command's help.

import BackupApp

/// A command line, parsed.
public struct ParsedCommand: Sendable, Equatable {
    /// The command words, e.g. ["hold", "set"]; empty for bare `backup`.
    public var path: [String] = []
    /// Option values by name; a flag has one empty value per use.
    public var values: [String: [String]] = [:]
    public var arguments: [String] = []

    public func flag(_ name: String) -> Bool { values[name] != nil }
    public func value(_ name: String) -> String? { values[name]?.last }
    public func all(_ name: String) -> [String] { values[name] ?? [] }

    /// `backup hold set` as a display string.
    public var commandName: String { (["backup"] + path).joined(separator: " ") }
}

public enum Parser {
    /// Parses `arguments` (without the program name).
    public static func parse(_ arguments: [String]) throws(AppError) -> ParsedCommand {
        var parsed = ParsedCommand()
        var spec = CommandTree.root
        var index = 0
        var optionsEnded = false
        func fail(_ message: String) -> AppError {
            AppError(.usage, "\(message); see `\(parsed.commandName) --help`")
        }
        while index < arguments.count {
            let word = arguments[index]
            index += 1
            if !optionsEnded && word == "--" {
                optionsEnded = true
                continue
            }
            if !optionsEnded && word.hasPrefix("--") {
                var name = String(word.dropFirst(2))
                var inline: String?
                if let equals = name.firstIndex(of: "=") {
                    inline = String(name[name.index(after: equals)...])
                    name = String(name[..<equals])
                }
                guard let option = (spec.options + CommandTree.globalOptions).first(where: { $0.name == name }) else {
                    throw fail("unknown option --\(name) for `\(parsed.commandName)`")
                }
                if parsed.values[name] != nil && !option.repeatable {
                    throw fail("--\(name) is given more than once")
                }
                if option.value == .none {
                    if inline != nil { throw fail("--\(name) takes no value") }
                    parsed.values[name, default: []].append("")
                    continue
                }
                if case .optional = option.value, inline == nil {
                    parsed.values[name, default: []].append("")
                    continue
                }
                let value: String
                if let inline {
                    value = inline
                } else {
                    guard index < arguments.count else { throw fail("--\(name) needs a value (\(option.usage))") }
                    value = arguments[index]
                    index += 1
                }
                if case .choice(let words) = option.value, !words.contains(value) {
                    throw fail("--\(name) must be one of \(words.joined(separator: ", ")), not \"\(value)\"")
                }
                if value.isEmpty { throw fail("--\(name) needs a non-empty value") }
                parsed.values[name, default: []].append(value)
                continue
            }
            if !optionsEnded && word.hasPrefix("-") && word.count > 1 {
                throw fail("unknown option \(word) (options are spelled --name)")
            }
            if !spec.subcommands.isEmpty && parsed.arguments.isEmpty, let sub = spec.subcommand(word) {
                spec = sub
                parsed.path.append(word)
                continue
            }
            if !spec.subcommands.isEmpty && spec.arguments.isEmpty {
                let names = spec.subcommands.filter { !$0.hidden }.map(\.name).joined(separator: ", ")
                throw fail("unknown command \"\(word)\"; commands: \(names)")
            }
            guard parsed.arguments.count < spec.arguments.count else {
                throw fail("unexpected argument \"\(word)\"")
            }
            parsed.arguments.append(word)
        }
        return parsed
    }

    /// The spec of a parsed command path.
    public static func spec(for path: [String]) -> CommandSpec {
        var spec = CommandTree.root
        for word in path { if let sub = spec.subcommand(word) { spec = sub } }
        return spec
    }
}
