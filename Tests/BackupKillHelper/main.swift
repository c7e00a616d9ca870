// A restore that kills its own process (SIGKILL, no cleanup) at a chosen point, for the
// tests that resume after a process death:
//
//   BackupKillHelper REMOTE TARGET RECORD POINT N [TRANSFERS]
//
// POINT: before-download (just before the Nth download), after-download (the Nth download
// finished, its record entry not yet saved), mid-placement (the Nth group placed one file).
// TRANSFERS: the restore's downloads in flight (default 1).

import BackupEngine
import BackupStorage
import BackupTestSupport
import BackupTree
import Foundation
import Synchronization

let arguments = CommandLine.arguments
guard (6...7).contains(arguments.count), let n = Int(arguments[5]), let transfers = Int(arguments.count == 7 ? arguments[6] : "1") else {
    FileHandle.standardError.write(Data("usage: BackupKillHelper REMOTE TARGET RECORD POINT N [TRANSFERS]\n".utf8))
    exit(2)
}
let (remote, targetRoot, recordPath, point) = (arguments[1], arguments[2], arguments[3], arguments[4])

@Sendable func die() -> Never {
    kill(getpid(), SIGKILL)
    fatalError("SIGKILL did not end the process")
}

/// Places one file of the Nth group, then dies: a placement cut off midway.
struct DyingPlacement: RestorePlacement {
    let inner: StagedPlacement
    let dieAtGroup: Int
    let count = Counter()

    func place(_ group: RestoreGroup) async throws -> PlacementDecision {
        if count.next() == dieAtGroup {
            try inner.target.place(Array(group.files.prefix(1)))
            die()
        }
        return try await inner.place(group)
    }
}

final class Counter: Sendable {
    private let value = Mutex(0)
    func next() -> Int { value.withLock { $0 += 1; return $0 } }
}

let storage = FaultyStorage(FolderStorage(root: remote))
switch point {
case "before-download": storage.setHook { call, count in if case .download = call, count == n { die() } }
case "after-download":
    // Counted as they finish: with several in flight, the Nth to finish need not be the Nth to start.
    let finished = Counter()
    storage.setAfterHook { call, _ in if case .download = call, finished.next() == n { die() } }
case "mid-placement": break
default:
    FileHandle.standardError.write(Data("unknown point \(point)\n".utf8))
    exit(2)
}

let target = RestoreTarget(root: targetRoot)
let state = try StateStore(path: recordPath + ".probe-state")
guard case .found(let marker, let source, let files) = await SyncEngine(storage: storage, state: state).probe() else {
    FileHandle.standardError.write(Data("no backup at \(remote)\n".utf8))
    exit(3)
}
let plan = try RestorePlanner.plan(marker: marker, source: source, files: files, target: target).plan
try target.prepare()
let staged = StagedPlacement(target: target)
let placement: any RestorePlacement = point == "mid-placement" ? DyingPlacement(inner: staged, dieAtGroup: n) : staged
let outcome = try await RestoreEngine(storage: storage, record: try RestoreRecord(path: recordPath, writer: true), staging: target, transfers: transfers).start(plan, placement: placement)
print("finished without dying: \(outcome)")
exit(4)
