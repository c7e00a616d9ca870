// Whether an exclude list leaves out every file below a folder, so the scanner can skip the
// whole subtree without opening it. PatternList decides one file path at a time; this answers
// the same question for all files below a folder at once, from the compiled patterns.

/// The folder-level reading of a `PatternList`, used to prune excluded subtrees.
///
/// The answer is conservative: `true` only when every possible file below the folder is
/// matched (so pruning never hides a file the list would keep). A wildcard that happens to
/// match every name without being `*` (such as `?*`) is not recognised, and such a folder
/// is walked and its files matched one by one, which gives the same result, only slower.
struct FolderExclusion {
    let list: PatternList

    /// Whether every file below the folder `folderPath` ("a/b", never "") is matched.
    func excludesEverything(below folderPath: String) -> Bool {
        if list.isEmpty { return false }
        let bytes = Array(folderPath.utf8)
        return bytes.withUnsafeBufferPointer { buffer in
            let segments = buffer.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
                .map { UnsafeBufferPointer(rebasing: $0) }
            // The last matching entry decides for each file. Walking back from the end, a later
            // positive entry can only exclude more, so only a later negation that might match
            // something below the folder stands in the way of an entry that matches all of it.
            for entry in list.entries.reversed() {
                if entry.negated {
                    if Self.mightMatchBelow(entry.pattern.form, segments) { return false }
                } else if Self.matchesAllBelow(entry.pattern.form, segments) {
                    return true
                }
            }
            return false
        }
    }

    /// Whether `form` matches every file path that starts with the folder `segments`.
    static func matchesAllBelow(_ form: PatternForm, _ segments: [UnsafeBufferPointer<UInt8>]) -> Bool {
        switch form {
        case .name(let glob, _):
            // Every segment of the folder is a directory segment of each file below it.
            return segments.contains { glob.matches($0) }
        case .path(let tokens):
            var states = TokenStates(tokens)
            for segment in segments { states.consume { glob in glob.matches(segment) } }
            // One more segment standing for any name at all: only `*` and `**` accept it. What
            // follows must be only `**`, which then also absorbs any deeper segments.
            states.consume { glob in if case .anything = glob.kind { true } else { false } }
            return states.reachedEnd
        }
    }

    /// Whether `form` might match some file path that starts with the folder `segments`.
    static func mightMatchBelow(_ form: PatternForm, _ segments: [UnsafeBufferPointer<UInt8>]) -> Bool {
        switch form {
        case .name:
            // Could match a file's own name, whatever the folder.
            return true
        case .path(let tokens):
            var states = TokenStates(tokens)
            for segment in segments { states.consume { glob in glob.matches(segment) } }
            // Some tokens are left for the segments below the folder (any glob is assumed
            // satisfiable by some name).
            return states.hasTokensLeft
        }
    }
}

/// The set of token positions a path pattern can be at after some segments: an NFA run over
/// the tokens, where `**` may stay put (eat a segment) or step past (eat nothing).
private struct TokenStates {
    let tokens: [PathToken]
    var reachable: [Bool]

    init(_ tokens: [PathToken]) {
        self.tokens = tokens
        reachable = [Bool](repeating: false, count: tokens.count + 1)
        reachable[0] = true
        closeOverEmptyMatches()
    }

    var reachedEnd: Bool { reachable[tokens.count] }
    var hasTokensLeft: Bool { reachable.dropLast().contains(true) }

    /// Advances over one segment; `accepts` says whether a segment glob matches it.
    mutating func consume(_ accepts: (SegmentGlob) -> Bool) {
        var next = [Bool](repeating: false, count: tokens.count + 1)
        for index in tokens.indices where reachable[index] {
            switch tokens[index] {
            case .anySegments:
                next[index] = true
            case .segment(let glob):
                if accepts(glob) { next[index + 1] = true }
            }
        }
        reachable = next
        closeOverEmptyMatches()
    }

    private mutating func closeOverEmptyMatches() {
        for index in tokens.indices where reachable[index] && tokens[index] == .anySegments {
            reachable[index + 1] = true
        }
    }
}
