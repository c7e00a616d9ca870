// Two stages of one job on two cores: a producer on a thread of its own hands what it makes, in
// batches and in order, to the calling thread, which consumes it as it comes. A restore's plan
// is made so: the marker is read and matched with the listing on one core while the record
// writes the files down on the other.

import Dispatch
import Foundation
import Synchronization

/// Runs a producer on its own thread while the caller consumes its items in order.
public enum Handoff {
    /// Runs `produce` on a new thread; every item it emits is passed to `consume` on the
    /// calling thread, in the order emitted, at most `depth` batches of `batch` items ahead
    /// of it (memory stays bounded however much is produced). Returns what `produce` returns.
    ///
    /// The first error wins: one thrown by `consume` stops the producer (its next `emit`
    /// throws) and is rethrown once the producer has returned; one thrown by `produce` is
    /// rethrown after every item emitted before it was consumed.
    public static func run<Item: Sendable, Output: Sendable>(
        name: String, batch: Int = 512, depth: Int = 8,
        produce: @escaping @Sendable (_ emit: (Item) throws -> Void) throws -> Output,
        consume: (Item) throws -> Void
    ) throws -> Output {
        let channel = Channel<Item, Output>(depth: max(1, depth))
        let size = max(1, batch)
        let thread = Thread {
            var pending: [Item] = []
            pending.reserveCapacity(size)
            let outcome: Result<Output, any Error>
            do {
                let output = try produce { item in
                    pending.append(item)
                    if pending.count == size {
                        try channel.send(pending)
                        pending.removeAll(keepingCapacity: true)
                    }
                }
                if !pending.isEmpty { try channel.send(pending) }
                outcome = .success(output)
            } catch {
                // What was emitted before the failure is still handed over, then the failure.
                if !pending.isEmpty { try? channel.send(pending) }
                outcome = .failure(error)
            }
            channel.finish(outcome)
        }
        thread.name = name
        thread.stackSize = 8 << 20
        thread.start()

        var failure: (any Error)?
        while true {
            switch channel.receive() {
            case .items(let items):
                guard failure == nil else { continue }
                do {
                    for item in items { try consume(item) }
                } catch {
                    failure = error
                    channel.stop()
                }
            case .finished(let outcome):
                if let failure { throw failure }
                return try outcome.get()
            }
        }
    }

    /// What the producer throws from `emit` once the consumer has failed.
    struct Stopped: Error {}

    private enum Received<Item: Sendable, Output: Sendable> {
        case items([Item])
        case finished(Result<Output, any Error>)
    }

    /// The batches between the two threads: `free` counts the places left, `filled` what
    /// waits (each batch sent and the end signal it once).
    private final class Channel<Item: Sendable, Output: Sendable>: Sendable {
        private struct State {
            var batches: [[Item]] = []
            var head = 0
            var outcome: Result<Output, any Error>?
            var stopped = false
        }

        private let state = Mutex(State())
        private let free: DispatchSemaphore
        private let filled = DispatchSemaphore(value: 0)

        init(depth: Int) { free = DispatchSemaphore(value: depth) }

        /// The producer's side: waits for a place, then queues `items`.
        func send(_ items: [Item]) throws {
            free.wait()
            let stopped = state.withLock { state in
                if !state.stopped { state.batches.append(items) }
                return state.stopped
            }
            if stopped {
                // The place goes back: a semaphore let go of below its start is a crash.
                free.signal()
                throw Stopped()
            }
            filled.signal()
        }

        func finish(_ outcome: Result<Output, any Error>) {
            state.withLock { $0.outcome = outcome }
            filled.signal()
        }

        /// The consumer's side: the next batch, or the end once every batch was received.
        func receive() -> Received<Item, Output> {
            filled.wait()
            let next: Received<Item, Output>? = state.withLock { state in
                if state.head < state.batches.count {
                    let items = state.batches[state.head]
                    state.head += 1
                    // Drop what was received now and then, so the queue does not keep it.
                    if state.head >= 64 {
                        state.batches.removeFirst(state.head)
                        state.head = 0
                    }
                    return .items(items)
                }
                return state.outcome.map { .finished($0) }
            }
            guard let next else { preconditionFailure("Handoff: signalled with nothing to receive") }
            if case .items = next { free.signal() }
            return next
        }

        /// The consumer failed: the producer's next send throws.
        func stop() {
            state.withLock { $0.stopped = true }
        }
    }
}
