// Help text, made from the command tree.

public enum Help {
    /// The help of the command at `path`.
    public static func text(for path: [String]) -> String {
        let spec = Parser.spec(for: path)
        let name = (["backup"] + path).joined(separator: " ")
        var lines: [String] = []
        lines.append("\(name) — \(spec.summary)")
        lines.append("")
        lines.append("Usage: " + usage(spec, name: name))
        if !spec.discussion.isEmpty {
            lines.append("")
            lines += wrap(spec.discussion, width: 78)
        }
        let visible = spec.subcommands.filter { !$0.hidden }
        if !visible.isEmpty {
            lines.append("")
            lines.append("Commands:")
            let width = (visible.map(\.name.count).max() ?? 0) + 2
            for sub in visible { lines.append("  " + sub.name.padding(toLength: width, withPad: " ", startingAt: 0) + sub.summary) }
        }
        for argument in spec.arguments {
            lines.append("")
            lines.append("  \(argument.name)  \(argument.help)")
        }
        let options = spec.options + CommandTree.globalOptions
        lines.append("")
        lines.append("Options:")
        let width = (options.map(\.usage.count).max() ?? 0) + 2
        for option in options {
            lines.append("  " + option.usage.padding(toLength: width, withPad: " ", startingAt: 0) + option.help)
        }
        if path.isEmpty {
            lines.append("")
            lines.append("Exit status: 0 completed, 1 failed, 2 usage or config error, 3 unavailable (a guard, the hold,")
            lines.append("a busy profile), 4 restore incomplete, 5 the remote's data failed a check (a hash or size")
            lines.append("mismatch, a refused name), 130 interrupted. See backup(1).")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The one-line usage of a command.
    public static func usage(_ spec: CommandSpec, name: String) -> String {
        var parts = [name]
        if !spec.subcommands.filter({ !$0.hidden }).isEmpty { parts.append(spec.arguments.isEmpty ? "COMMAND" : "[COMMAND]") }
        for option in spec.options {
            parts.append((option.required ? option.usage : "[\(option.usage)]") + (option.repeatable ? "…" : ""))
        }
        for argument in spec.arguments { parts.append(argument.optional ? "[\(argument.name)]" : argument.name) }
        return parts.joined(separator: " ")
    }

    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        for paragraph in text.split(separator: "\n") {
            var line = ""
            for word in paragraph.split(separator: " ") {
                if !line.isEmpty && line.count + 1 + word.count > width {
                    lines.append(line)
                    line = ""
                }
                line += (line.isEmpty ? "" : " ") + word
            }
            if !line.isEmpty { lines.append(line) }
        }
        return lines
    }
}
