// The two-stage run a restore's plan is written with: everything emitted arrives once, in
// order; the first error wins and stops the other side.

import BackupEngine
import Synchronization
import XCTest

final class HandoffTests: XCTestCase {
    private struct Failure: Error, Equatable { let at: Int }

    func testEveryItemArrivesOnceInOrderAndTheOutputIsReturned() throws {
        for (batch, depth, count) in [(1, 1, 0), (1, 1, 5), (7, 2, 10_000), (512, 8, 100_003)] {
            var received: [Int] = []
            let output = try Handoff.run(name: "test", batch: batch, depth: depth, produce: { emit in
                for item in 0..<count { try emit(item) }
                return "made \(count)"
            }, consume: { received.append($0) })
            XCTAssertEqual(output, "made \(count)")
            XCTAssertEqual(received, Array(0..<count), "batch \(batch), depth \(depth)")
        }
    }

    func testAConsumerFailureStopsTheProducerAndIsThrown() {
        let emitted = Atomic<Int>(0)
        let stoppedAt = Atomic<Int>(-1)
        var consumed = 0
        XCTAssertThrowsError(try Handoff.run(name: "test", batch: 4, depth: 2, produce: { emit in
            for item in 0..<1_000_000 {
                do {
                    try emit(item)
                } catch {
                    stoppedAt.store(item, ordering: .relaxed)
                    throw error
                }
                emitted.add(1, ordering: .relaxed)
            }
            return 0
        }, consume: { item in
            if item == 100 { throw Failure(at: item) }
            consumed += 1
        })) { error in
            XCTAssertEqual(error as? Failure, Failure(at: 100))
        }
        XCTAssertEqual(consumed, 100)
        // Stopped within the batches that were already on their way, not at the end.
        XCTAssertGreaterThan(stoppedAt.load(ordering: .relaxed), 100)
        XCTAssertLessThan(emitted.load(ordering: .relaxed), 100 + 4 * 8)
    }

    func testAProducerFailureComesAfterEverythingItEmittedBeforeIt() {
        var received: [Int] = []
        XCTAssertThrowsError(try Handoff.run(name: "test", batch: 8, depth: 2, produce: { emit -> Int in
            for item in 0..<37 { try emit(item) }
            throw Failure(at: 37)
        }, consume: { received.append($0) })) { error in
            XCTAssertEqual(error as? Failure, Failure(at: 37))
        }
        XCTAssertEqual(received, Array(0..<37))
    }
}
