// The config file: INI sections, one per profile, like rclone's. Parsing keeps line numbers
// so every error names the file, the line and the key; writing replaces one profile's
// section and leaves the rest of the file as it was, with mode 0600. Lines end in LF or CRLF;
// a NUL byte is refused, and no value is written that holds a control character (a line
// break in a value would write a line of its own: another key, a password_command).
//
//     [default]
//     source = /home/alice/Documents
//     remote = /mnt/backup/documents
//     exclude = *.tmp
//     group.papers = taxes/
//     group.papers.required = yes

import BackupEngine
import BackupTree
import Foundation

/// A group of files restored together (and a marker entry).
public struct ProfileGroup: Sendable, Equatable {
    public var name: String
    public var patterns: [String]
    public var required: Bool

    public init(name: String, patterns: [String], required: Bool) {
        self.name = name
        self.patterns = patterns
        self.required = required
    }
}

extension ProfileGroup {
    /// Groups from specs written as `NAME=PATTERN` or `NAME=PATTERN,required` (`backup init
    /// --group`, and the interface's group list): one pattern each; specs of one name add
    /// patterns to that group, which is required if any of them says so. `label` names where
    /// the specs came from in an error ("--group").
    public static func parse(specs: [String], label: String) throws(AppError) -> [ProfileGroup] {
        var groups: [ProfileGroup] = []
        for spec in specs {
            guard let equals = spec.firstIndex(of: "=") else {
                throw AppError(.usage, "\(label) \(spec): expected NAME=PATTERN or NAME=PATTERN,required")
            }
            let name = String(spec[..<equals])
            var pattern = String(spec[spec.index(after: equals)...])
            var required = false
            if pattern.hasSuffix(",required") {
                required = true
                pattern = String(pattern.dropLast(",required".count))
            }
            guard Profile.isValidName(name), !pattern.isEmpty else {
                throw AppError(.usage, "\(label) \(spec): the name must be letters, digits, \"-\", \"_\", \".\" and the pattern non-empty")
            }
            if let index = groups.firstIndex(where: { $0.name == name }) {
                groups[index].patterns.append(pattern)
                groups[index].required = groups[index].required || required
            } else {
                groups.append(ProfileGroup(name: name, patterns: [pattern], required: required))
            }
        }
        return groups
    }

    /// The specs `parse` reads back into `groups`: one per pattern, the first of a required
    /// group marked.
    public static func specs(_ groups: [ProfileGroup]) -> [String] {
        groups.flatMap { group in
            group.patterns.enumerated().map { index, pattern in
                "\(group.name)=\(pattern)" + (group.required && index == 0 ? ",required" : "")
            }
        }
    }
}

/// One profile: what to back up, where, and how.
public struct Profile: Sendable, Equatable {
    public var name: String
    /// The folder backed up.
    public var source: String
    /// The remote URL: a folder path or file:// URL, webdav(s)://, s3://.
    public var remote: String
    /// Paths never backed up (gitignore-style).
    public var excludes: [String] = []
    /// Paths compared by size only, never hashed (large media, disk images).
    public var sizeCompared: [String] = []
    /// Paths kept on the remote after they are deleted locally.
    public var keepRemotely: [String] = []
    /// Groups, in restore order (required groups go first at restore time).
    public var groups: [ProfileGroup] = []
    /// Provider settings: user, password_command, ca_file, transfers, region, endpoint, path_style.
    public var settings: [String: String] = [:]
    /// The writer id this profile's markers carry (made by `init`); nil in a profile written
    /// before there were writer ids, until its first sync that writes makes one.
    public var writer: String?

    /// How many uploads or downloads a job keeps in flight when `transfers` is not set.
    public static let defaultTransfers = 4

    /// The `transfers` setting: how many uploads (sync) or downloads (restore) are in flight.
    public var transfers: Int { settings["transfers"].flatMap(Int.init) ?? Self.defaultTransfers }

    public init(name: String, source: String, remote: String) {
        self.name = name
        self.source = source
        self.remote = remote
    }

    /// The keys a profile may have (besides `group.NAME` and `group.NAME.required`).
    public static let providerKeys = [
        "user", "password_command", "ca_file", "transfers", "region", "endpoint", "path_style", "keep_versions", "max_change",
        "encrypt", "crypt_password_command", "crypt_password2_command", "identity_file", "on_failure", "on_success",
    ]

    /// `keep_versions` when it is not set.
    public static let defaultKeepVersions = "30d"
    /// `max_change` when it is not set.
    public static let defaultMaxChange = "50%"

    /// How long replaced and deleted files are kept on the remote (`keep_versions`); nil: off.
    public var versions: VersionPolicy? {
        (try? VersionPolicy.parse(settings["keep_versions"] ?? Self.defaultKeepVersions)) ?? nil
    }

    /// The change guard (`max_change`); nil: off.
    public var changeGuard: ChangeGuard? {
        (try? ChangeGuard.parse(settings["max_change"] ?? Self.defaultMaxChange)) ?? nil
    }
    static let listKeys = ["exclude", "size_compared", "keep_remotely"]
    static let singleKeys = ["source", "remote", "writer"] + providerKeys

    /// The section's lines, in a stable order.
    func lines() -> [String] {
        var out = ["[\(name)]", "source = \(source)", "remote = \(remote)"]
        if let writer { out.append("writer = \(writer)") }
        out += excludes.map { "exclude = \($0)" }
        out += sizeCompared.map { "size_compared = \($0)" }
        out += keepRemotely.map { "keep_remotely = \($0)" }
        for group in groups {
            out += group.patterns.map { "group.\(group.name) = \($0)" }
            if group.required { out.append("group.\(group.name).required = yes") }
        }
        for key in Profile.providerKeys { if let value = settings[key] { out.append("\(key) = \(value)") } }
        return out
    }
}

/// The config file, parsed.
public struct Config: Sendable, Equatable {
    /// The file it came from (or will be written to).
    public var path: String
    /// Profiles in file order.
    public var profiles: [Profile]

    public init(path: String, profiles: [Profile] = []) {
        self.path = path
        self.profiles = profiles
    }

    public func profile(_ name: String) -> Profile? { profiles.first { $0.name == name } }

    /// Reads the config at `path`; a missing file is an empty config.
    public static func load(_ path: String) throws(AppError) -> Config {
        guard FileManager.default.fileExists(atPath: path) else { return Config(path: path) }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .usage("cannot read the config file \(path): check its permissions")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            let lines = data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            let bad = lines.firstIndex { String(data: Data($0), encoding: .utf8) == nil } ?? 0
            throw .usage("\(path):\(bad + 1): the config file is not UTF-8 text; save it as UTF-8")
        }
        return try parse(text, path: path)
    }

    /// The lines of config text, split at LF (a CRLF is one Character to Swift, so splitting
    /// Characters at "\n" would read a CRLF file as one line), each as written, CR included.
    static func rawLines(_ text: String) -> [String] {
        text.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false).map { String(String.UnicodeScalarView($0)) }
    }

    /// A raw line without the CR of a CRLF ending, trimmed of spaces and tabs.
    static func content(_ raw: String) -> String {
        (raw.unicodeScalars.last == "\r" ? String(raw.unicodeScalars.dropLast()) : raw).trimmingCharacters(in: .whitespaces)
    }

    /// Whether `value` holds a C0 control (a tab or line break too), DEL or a C1 control:
    /// none may be written into the config file.
    public static func holdsControlCharacter(_ value: String) -> Bool {
        value.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }
    }

    /// Parses config text; errors name `path`, the line and the key.
    public static func parse(_ text: String, path: String) throws(AppError) -> Config {
        var profiles: [Profile] = []
        var current: Profile?
        var seen = Set<String>()
        var sectionLine = 0
        func error(_ line: Int, _ message: String) -> AppError {
            .usage("\(path):\(line): \(message)")
        }
        /// A pattern checked here, where its line is known (the jobs compile them again).
        func pattern(_ value: String, _ key: String, _ line: Int, _ profile: Profile) throws(AppError) -> String {
            do {
                _ = try PatternList([value])
            } catch let failure {
                throw error(line, "key \"\(key)\" in [\(profile.name)]: \(failure.description)")
            }
            return value
        }
        func finish() throws(AppError) {
            guard var profile = current else { return }
            if profile.source.isEmpty {
                throw error(sectionLine, "profile [\(profile.name)] has no \"source\" key; add `source = /path/to/folder`")
            }
            if profile.remote.isEmpty {
                throw error(sectionLine, "profile [\(profile.name)] has no \"remote\" key; add `remote = /path/or/url`")
            }
            profile.groups = profile.groups.filter { !$0.patterns.isEmpty || $0.required }
            profiles.append(profile)
            current = nil
        }
        for (offset, raw) in rawLines(text).enumerated() {
            let number = offset + 1
            let line = content(raw)
            if raw.unicodeScalars.contains("\u{0}") {
                throw error(number, "the line holds a NUL byte: the config file must be text; remove it")
            }
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]"), line.count > 2 else { throw error(number, "a section header must look like [profile-name]") }
                try finish()
                let name = String(line.dropFirst().dropLast()).trimmingCharacters(in: .whitespaces)
                guard Profile.isValidName(name) else {
                    throw error(number, "\"\(name)\" is not a valid profile name: use letters, digits, \"-\", \"_\" and \".\"")
                }
                guard seen.insert(name).inserted else { throw error(number, "profile [\(name)] is defined twice") }
                current = Profile(name: name, source: "", remote: "")
                sectionLine = number
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw error(number, "expected `key = value`, found \"\(line)\"")
            }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard var profile = current else {
                throw error(number, "key \"\(key)\" comes before any [profile] section")
            }
            if value.isEmpty { throw error(number, "key \"\(key)\" in [\(profile.name)] has no value") }
            switch key {
            case "source":
                guard profile.source.isEmpty else { throw error(number, "key \"source\" is set twice in [\(profile.name)]") }
                profile.source = value
            case "remote":
                guard profile.remote.isEmpty else { throw error(number, "key \"remote\" is set twice in [\(profile.name)]") }
                profile.remote = value
            case "writer":
                guard profile.writer == nil else { throw error(number, "key \"writer\" is set twice in [\(profile.name)]") }
                profile.writer = value
            case "exclude": profile.excludes.append(try pattern(value, key, number, profile))
            case "size_compared": profile.sizeCompared.append(try pattern(value, key, number, profile))
            case "keep_remotely": profile.keepRemotely.append(try pattern(value, key, number, profile))
            case _ where key.hasPrefix("group."):
                let rest = String(key.dropFirst("group.".count))
                if rest.hasSuffix(".required") {
                    let name = String(rest.dropLast(".required".count))
                    guard let flag = Config.bool(value) else {
                        throw error(number, "key \"\(key)\" in [\(profile.name)] must be yes or no, found \"\(value)\"")
                    }
                    profile.setGroup(name) { $0.required = flag }
                } else {
                    guard Profile.isValidName(rest) else {
                        throw error(number, "\"\(rest)\" in key \"\(key)\" is not a valid group name: use letters, digits, \"-\", \"_\" and \".\"")
                    }
                    let checked = try pattern(value, key, number, profile)
                    profile.setGroup(rest) { $0.patterns.append(checked) }
                }
            case _ where Profile.providerKeys.contains(key):
                guard profile.settings[key] == nil else { throw error(number, "key \"\(key)\" is set twice in [\(profile.name)]") }
                if key == "transfers", Int(value).map({ (1...64).contains($0) }) != true {
                    throw error(number, "key \"transfers\" in [\(profile.name)] must be a number from 1 to 64, found \"\(value)\"")
                }
                if key == "encrypt", Config.bool(value) == nil {
                    throw error(number, "key \"encrypt\" in [\(profile.name)] must be yes or no, found \"\(value)\"")
                }
                if key == "keep_versions" {
                    do throws(VersionPolicyError) {
                        _ = try VersionPolicy.parse(value)
                    } catch let refused {
                        throw error(number, "in [\(profile.name)]: \(refused.message)")
                    }
                }
                if key == "max_change" {
                    do throws(ChangeGuardError) {
                        _ = try ChangeGuard.parse(value)
                    } catch let refused {
                        throw error(number, "in [\(profile.name)]: \(refused.message)")
                    }
                }
                profile.settings[key] = value
            default:
                let known = (Profile.singleKeys + Profile.listKeys + ["group.NAME", "group.NAME.required"]).joined(separator: ", ")
                throw error(number, "unknown key \"\(key)\" in [\(profile.name)]; known keys: \(known)")
            }
            current = profile
        }
        try finish()
        return Config(path: path, profiles: profiles)
    }

    public static func bool(_ value: String) -> Bool? {
        switch value.lowercased() {
        case "yes", "true", "on", "1": true
        case "no", "false", "off", "0": false
        default: nil
        }
    }

    /// Adds or replaces `profile` and writes the file (mode 0600, folder 0700), keeping the
    /// other sections, comments included, as they were.
    public mutating func save(_ profile: Profile) throws(AppError) {
        let section = profile.lines()
        if let bad = section.first(where: Config.holdsControlCharacter) {
            throw .usage("cannot write \"\(TerminalText.visible(bad))\" to \(path): a config value cannot hold a control "
                + "character (a line break, a tab, an escape); nothing was written")
        }
        var kept = linesWithout(profile.name)
        if kept.isEmpty { kept = ["# backup configuration: one [section] per profile; see backup(1)."] }
        let text = (kept + [""] + section).joined(separator: "\n") + "\n"
        try writePrivately(text)
        if let index = profiles.firstIndex(where: { $0.name == profile.name }) {
            profiles[index] = profile
        } else {
            profiles.append(profile)
        }
    }

    /// Removes the section of profile `name` and writes the file, keeping the other sections,
    /// comments included, as they were.
    public mutating func remove(_ name: String) throws(AppError) {
        try writePrivately(linesWithout(name).joined(separator: "\n") + "\n")
        profiles.removeAll { $0.name == name }
    }

    /// The file's lines as they are, but for the section of profile `name` and the blank lines
    /// at the end.
    private func linesWithout(_ name: String) -> [String] {
        var kept: [String] = []
        if let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) {
            var skipping = false
            for raw in Config.rawLines(text) {
                let line = Config.content(raw)
                if line.hasPrefix("[") && line.hasSuffix("]") {
                    skipping = String(line.dropFirst().dropLast()).trimmingCharacters(in: .whitespaces) == name
                }
                if !skipping { kept.append(raw) }
            }
        }
        while let last = kept.last, Config.content(last).isEmpty { kept.removeLast() }
        return kept
    }

    private func writePrivately(_ text: String) throws(AppError) {
        let folder = (path as NSString).deletingLastPathComponent
        do throws(ReplacedFile.Failure) {
            try ReplacedFile.write(Data(text.utf8), to: path, mode: 0o600, folderMode: 0o700)
        } catch {
            throw .usage("cannot write the config file \(path): \(error.reason); check that \(folder) is writable")
        }
    }
}

extension Profile {
    /// Profile and group names: letters, digits, "-", "_", "." (they become folder names).
    public static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && name.count <= 64
            && name.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || "-_.".unicodeScalars.contains($0) }
    }

    /// A new writer id for this profile: its name and the machine's, and 8 random hex digits,
    /// so that a refusal can say whose backup a remote holds.
    public static func makeWriterId(profile: String) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        let host = gethostname(&buffer, buffer.count - 1) == 0
            ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        let safeHost = String(host.unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) || "-_.".unicodeScalars.contains($0) })
        let random = String(UInt32.random(in: .min ... .max), radix: 16)
        return "\(profile)@\(safeHost.isEmpty ? "host" : safeHost)-\(String(repeating: "0", count: 8 - random.count))\(random)"
    }

    mutating func setGroup(_ name: String, _ change: (inout ProfileGroup) -> Void) {
        if let index = groups.firstIndex(where: { $0.name == name }) {
            change(&groups[index])
        } else {
            var group = ProfileGroup(name: name, patterns: [], required: false)
            change(&group)
            groups.append(group)
        }
    }
}
