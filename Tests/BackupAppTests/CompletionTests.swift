// The committed completion scripts, run in real shells: bash with bash-completion (and
// without it), zsh's completion system driven through a pseudo-terminal, and fish's
// `complete -C`. Each shell must complete command words, option names, option values
// (`--place all|ask`), profile names read from the config, and folders for folder options.
// A missing shell fails the test: .ci/run installs bash-completion, zsh and fish.

import Foundation
import XCTest

final class CompletionTests: XCTestCase {
    private var home: URL!
    /// The config the profile names come from: `$XDG_CONFIG_HOME/backup/config`.
    private var environment: [String: String] {
        ["HOME": home.path, "XDG_CONFIG_HOME": home.appendingPathComponent("config").path, "XDG_DATA_HOME": home.appendingPathComponent("data").path]
    }

    override func setUpWithError() throws {
        home = try Tools.temporaryFolder("backup-completion")
        let config = home.appendingPathComponent("config/backup")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        try """
            # backup configuration
            [default]
            source = /srv/a
            remote = /srv/b

              [ work.docs ]
            source = /srv/c
            remote = /srv/d
            group.papers = taxes/
            """.write(to: config.appendingPathComponent("config"), atomically: true, encoding: .utf8)
        try """
            [other]
            source = /srv/e
            remote = /srv/f
            """.write(to: home.appendingPathComponent("other.conf"), atomically: true, encoding: .utf8)
        for folder in ["alpha", "alps", "beta"] {
            try FileManager.default.createDirectory(at: home.appendingPathComponent("tree/" + folder), withIntermediateDirectories: true)
        }
        _ = FileManager.default.createFile(atPath: home.appendingPathComponent("tree/alfile").path, contents: Data())
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: home)
    }

    // MARK: bash

    func testBashCompletesCommandWords() throws {
        XCTAssertEqual(try bash("backup res"), ["restore"])
        XCTAssertEqual(try bash("backup "), ["init", "sync", "status", "profiles", "schedule", "probe", "restore", "verify", "versions", "hold", "forget", "tui"])
        XCTAssertEqual(try bash("backup hold "), ["set", "clear"])
        XCTAssertEqual(try bash("backup --profile default hold s"), ["set"])
    }

    func testBashCompletesOptionNames() throws {
        XCTAssertEqual(try bash("backup restore --pl"), ["--place"])
        XCTAssertEqual(try bash("backup sync --allow"), ["--allow-shrink", "--allow-change", "--allow-missing-remote"])
        XCTAssertEqual(try bash("backup --pro"), ["--profile"])
    }

    func testBashOffersTheValuesOfAChoice() throws {
        XCTAssertEqual(try bash("backup restore --place "), ["all", "ask"])
        XCTAssertEqual(try bash("backup restore --place al"), ["all"])
        // Readline splits `--place=al` at "=": bash-completion joins it again.
        XCTAssertEqual(try bash("backup restore --place=al", words: ["backup", "restore", "--place", "=", "al"]), ["all"])
    }

    func testBashOffersProfileNamesFromTheConfig() throws {
        XCTAssertEqual(try bash("backup --profile "), ["default", "work.docs"])
        XCTAssertEqual(try bash("backup sync --profile w"), ["work.docs"])
        XCTAssertEqual(try bash("backup --config \(home.path)/other.conf status --profile "), ["other"])
    }

    func testBashOffersFoldersForFolderOptions() throws {
        let tree = home.appendingPathComponent("tree").path
        XCTAssertEqual(Set(try bash("backup restore --to \(tree)/al")), ["\(tree)/alpha", "\(tree)/alps"])
        XCTAssertEqual(try bash("backup init --source \(tree)/b"), ["\(tree)/beta"])
    }

    func testBashCompletesAfterAnOptionValueThatLooksLikeACommand() throws {
        // "hold" here is the value of --profile, not the command.
        XCTAssertEqual(try bash("backup --profile hold res"), ["restore"])
    }

    func testBashWorksWithoutBashCompletion() throws {
        XCTAssertEqual(try bash("backup res", bashCompletion: false), ["restore"])
        XCTAssertEqual(try bash("backup restore --pl", bashCompletion: false), ["--place"])
        XCTAssertEqual(try bash("backup restore --place ", bashCompletion: false), ["all", "ask"])
        XCTAssertEqual(try bash("backup --profile ", bashCompletion: false), ["default", "work.docs"])
    }

    func testBashCompletionLoadsFromTheInstalledPath() throws {
        let share = try installed()
        let result = try Tools.run("/bin/bash", ["--norc", "--noprofile", "-c", """
            source \(try bashCompletionScript())
            _completion_loader backup
            complete -p backup
            """], environment: environment.merging(["XDG_DATA_DIRS": share]) { _, new in new })
        XCTAssertEqual(result.stdout, "complete -F _backup backup\n", result.stderr)
    }

    // MARK: zsh

    func testZshCompletesCommandWords() throws {
        XCTAssertEqual(try zsh("backup res"), ["restore"])
        XCTAssertEqual(Set(try zsh("backup hold ")), ["set", "clear"])
    }

    func testZshCompletesOptionNames() throws {
        XCTAssertEqual(try zsh("backup restore --pl"), ["--place"])
    }

    func testZshOffersTheValuesOfAChoice() throws {
        XCTAssertEqual(Set(try zsh("backup restore --place ")), ["all", "ask"])
        XCTAssertEqual(Set(try zsh("backup restore --place=")), ["all", "ask"])
    }

    func testZshOffersProfileNamesFromTheConfig() throws {
        XCTAssertEqual(Set(try zsh("backup --profile ")), ["default", "work.docs"])
        XCTAssertEqual(try zsh("backup sync --profile w"), ["work.docs"])
        XCTAssertEqual(try zsh("backup --config \(home.path)/other.conf status --profile "), ["other"])
    }

    func testZshOffersFoldersForFolderOptions() throws {
        let tree = home.appendingPathComponent("tree").path
        XCTAssertEqual(Set(try zsh("backup restore --to \(tree)/al")), ["alpha", "alps"])
    }

    func testZshCompletionLoadsFromTheInstalledPath() throws {
        let share = try installed()
        XCTAssertEqual(try zsh("backup res", functions: share + "/zsh/site-functions"), ["restore"])
    }

    // MARK: fish

    func testFishCompletesCommandWords() throws {
        XCTAssertEqual(try fish("backup res"), ["restore"])
        XCTAssertEqual(Set(try fish("backup hold ")), ["clear", "set"])
    }

    func testFishCompletesOptionNames() throws {
        XCTAssertEqual(try fish("backup restore --pl"), ["--place"])
    }

    func testFishOffersTheValuesOfAChoice() throws {
        XCTAssertEqual(Set(try fish("backup restore --place ")), ["all", "ask"])
        XCTAssertEqual(Set(try fish("backup restore --place=")), ["--place=all", "--place=ask"])
    }

    func testFishOffersProfileNamesFromTheConfig() throws {
        XCTAssertEqual(Set(try fish("backup --profile ")), ["default", "work.docs"])
        XCTAssertEqual(try fish("backup sync --profile w"), ["work.docs"])
        XCTAssertEqual(try fish("backup --config \(home.path)/other.conf status --profile "), ["other"])
    }

    func testFishOffersFoldersForFolderOptions() throws {
        let tree = home.appendingPathComponent("tree").path
        XCTAssertEqual(Set(try fish("backup restore --to \(tree)/al")), ["\(tree)/alpha/", "\(tree)/alps/"])
    }

    func testFishCompletionLoadsFromTheInstalledPath() throws {
        let share = try installed()
        // fish loads a command's completions from XDG_DATA_DIRS once the command is on PATH.
        let folder = URL(fileURLWithPath: Tools.backup).deletingLastPathComponent().path
        let path = folder + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let result = try Tools.run(
            try shell("fish"), ["-c", "complete -C 'backup res'"],
            environment: environment.merging(["XDG_DATA_DIRS": share, "PATH": path]) { _, new in new })
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stdout.split(separator: "\n").map { String($0.split(separator: "\t")[0]) }, ["restore"])
    }

    // MARK: Running the shells

    /// The path of a shell, or a failure that says what CI must install.
    private func shell(_ name: String) throws -> String {
        guard let path = Tools.which(name) else { throw Missing(name: name) }
        return path
    }

    private struct Missing: Error, CustomStringConvertible {
        let name: String
        var description: String { "\(name) is not installed; .ci/run installs it (apt-get install \(name))" }
    }

    private func bashCompletionScript() throws -> String {
        let path = "/usr/share/bash-completion/bash_completion"
        guard FileManager.default.fileExists(atPath: path) else { throw Missing(name: "bash-completion") }
        return path
    }

    /// The candidates bash offers for `line` (cursor at its end), in order.
    private func bash(_ line: String, words: [String]? = nil, bashCompletion: Bool = true) throws -> [String] {
        var comp = words ?? line.split(separator: " ").map(String.init)
        if words == nil && line.hasSuffix(" ") { comp.append("") }
        let quoted = comp.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let script = """
            \(bashCompletion ? "source \(try bashCompletionScript())" : "")
            source '\(Tools.packageRoot.path)/completions/backup.bash'
            COMP_LINE='\(line)'
            COMP_POINT=${#COMP_LINE}
            COMP_WORDS=(\(quoted))
            COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
            COMPREPLY=()
            _backup backup "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        let result = try Tools.run(try shell("bash"), ["--norc", "--noprofile", "-c", script], environment: environment, timeout: 30)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stderr, "")
        return result.stdout.split(separator: "\n").map(String.init)
    }

    /// The candidates zsh's completion system offers for `line`, typed into an interactive
    /// zsh on a pseudo-terminal followed by Tab, with `functions` on fpath.
    private func zsh(_ line: String, functions: String? = nil) throws -> [String] {
        let harness = home.appendingPathComponent("capture.zsh")
        try Self.zshHarness.write(to: harness, atomically: true, encoding: .utf8)
        let result = try Tools.run(
            try shell("zsh"), ["-f", harness.path, functions ?? Tools.packageRoot.path + "/completions", line],
            environment: environment, timeout: 30)
        XCTAssertEqual(result.status, 0, result.stderr)
        var seen = Set<String>()
        return result.stdout.split(separator: "\n").map(String.init).filter { seen.insert($0).inserted }
    }

    /// The candidates fish offers for `line`, without their descriptions.
    private func fish(_ line: String) throws -> [String] {
        let script = "source '\(Tools.packageRoot.path)/completions/backup.fish'; complete -C '\(line)'"
        let result = try Tools.run(try shell("fish"), ["--no-config", "-c", script], environment: environment, timeout: 30)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stderr, "")
        return result.stdout.split(separator: "\n").map { String($0.split(separator: "\t", omittingEmptySubsequences: false)[0]) }
    }

    /// `make install-data` into a temporary DESTDIR; returns its `share` folder.
    private func installed() throws -> String {
        let destination = home.appendingPathComponent("destdir").path
        let result = try Tools.run(
            "/usr/bin/env", ["make", "-s", "install-data", "DESTDIR=\(destination)", "PREFIX=/usr/local"])
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        return destination + "/usr/local/share"
    }

    /// Runs an interactive zsh on a pseudo-terminal (zpty), loads compinit with $1 on fpath,
    /// wraps `compadd` to print every candidate it is given, types $2 and Tab, and prints
    /// the candidates until the completion ends.
    static let zshHarness = #"""
        zmodload zsh/zpty || exit 2
        zpty z zsh -f -i
        zpty -w z "PS1= ; RPROMPT= ; fpath=(${(q)1} \$fpath); autoload -Uz compinit; compinit -u -D"
        zpty -w z 'bindkey "^I" complete-word; zstyle ":completion:*" list-grouped false; zstyle ":completion:*" insert-tab false'
        zpty -w z 'compadd() { if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return; fi; local -a __hits; builtin compadd -O __hits "$@"; local h; for h in $__hits; do print -r -- "<<match>>$h"; done; builtin compadd "$@"; }'
        zpty -w z 'comppostfuncs=(__capture_done); __capture_done() { print -r -- "<<done>>"; exit; }'
        zpty -w z 'print -r -- "<<""ready>>"'
        local line
        while zpty -r z line; do [[ $line == *'<<ready>>'* ]] && break; done
        zpty -w -n z "$2"$'\t'
        while zpty -r z line; do
          line=${line//$'\r'/}
          line=${line%$'\n'}
          [[ $line == *'<<done>>'* ]] && break
          [[ $line == *'<<match>>'* ]] && print -r -- "${line#*<<match>>}"
        done
        zpty -d z
        """#
}
