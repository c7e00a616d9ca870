// A few workers that share one queue of items under one lock: each takes the next item, works
// on it outside the lock, then records how it ended and takes the next in one turn of the lock.
// The sync's uploads and the restore's downloads run this way: a task per item would cost two
// thread hand-offs each where the work itself never suspends (a folder remote).

import Synchronization

/// State that workers share under one lock (a class: a Mutex cannot be captured by the tasks).
final class Locked<State>: Sendable {
    let mutex: Mutex<State>
    init(_ state: sending State) { mutex = Mutex(state) }
}

enum Workers {
    /// How many items a worker handles before it lets other tasks (the progress output among
    /// them) have its thread.
    static let itemsBetweenYields = 16

    /// Runs `count` workers over `shared` until `take` gives none. `take` and `record` run under
    /// the lock, in the order the items were taken from the state; `work` runs outside it. A
    /// throw from `take` or `record` ends the workers (those in flight are cancelled) and is
    /// thrown here.
    static func run<State, Item: Sendable, Outcome: Sendable>(
        _ count: Int, over shared: Locked<State>,
        take: @escaping @Sendable (inout State) throws -> Item?,
        work: @escaping @Sendable (Item) async -> Outcome,
        record: @escaping @Sendable (Item, Outcome, inout State) throws -> Void
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<count {
                group.addTask {
                    var sinceYield = 0
                    var next = try shared.mutex.withLock { try take(&$0) }
                    while let item = next {
                        let outcome = await work(item)
                        next = try shared.mutex.withLock { state in
                            try record(item, outcome, &state)
                            return try take(&state)
                        }
                        sinceYield += 1
                        if sinceYield == itemsBetweenYields {
                            sinceYield = 0
                            await Task.yield()
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
    }
}
