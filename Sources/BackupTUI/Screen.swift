// What a screen is (one type with `draw` and `handle(key)`, like ncdu's *_draw/*_key), what
// it answers the loop, and the context every screen shares: the app's jobs, the clock, and
// how new jobs start (tests put unstarted jobs there and feed them events by hand).

import BackupApp
import BackupEngine
import BackupTerminal
import Foundation
import Synchronization

/// What a screen asks the loop to do after a key.
enum Response {
    /// The key was used; redraw.
    case handled
    /// Not this screen's key: the loop tries the global keys.
    case ignored
    case push(any Screen)
    /// Replaces this screen with another.
    case replace(any Screen)
    case pop
    case quit
    /// Hands the terminal to `body` (the person's editor), then redraws; the screen reappears.
    case outside(() -> Void)
    /// Moves this screen, its job still running, into the background (`Context.background`)
    /// and shows the one below it.
    case background
}

/// One screen: it draws itself and handles its keys. Screens live on the loop's thread.
protocol Screen: AnyObject {
    /// The title bar's text.
    var title: String { get }
    /// The screen's own key table (help shows it above the global one).
    var keys: KeyMap { get }
    /// The actions the footer offers now, in order.
    var hints: [Action] { get }
    /// The job the screen runs, while it runs: quitting asks first and then cancels it.
    var runningJob: (any Job)? { get }
    func draw(_ canvas: Canvas)
    func handle(_ key: Key) -> Response
    /// Takes the latest state of the screen's job; true when something changed.
    func update() -> Bool
    /// The screen is on top again (the one above it closed).
    func reappear()
    /// A question the screen's job waits on (a restore's placement): said where the screen
    /// is listed while in the background.
    var waitsForAnswer: Bool { get }
    /// Whether a text field has the keys: characters (`?` and `q` too) are typed, and the
    /// title bar and the footer name the function keys (F1 help, F10 quit) instead.
    var typing: Bool { get }
}

extension Screen {
    var runningJob: (any Job)? { nil }
    var typing: Bool { false }
    var waitsForAnswer: Bool { false }
    func update() -> Bool { false }
    func reappear() {}
}

/// A job a screen runs; cancellable from the loop.
protocol Job: AnyObject, Sendable {
    var isRunning: Bool { get }
    /// Asks the job to stop; what it finished stays recorded.
    func cancel()
}

/// What every screen shares. Lives on the loop's thread.
final class Context {
    let app: BackupApp
    /// Monotonic seconds, for rates and ETAs.
    let clock: @Sendable () -> Double
    /// The zone dates are shown in.
    var timeZone: TimeZone
    /// Starts a sync job (tests replace it).
    var startSync: (Profile, SyncRequest) -> SyncJob
    /// Starts a restore job for a profile (or a bare remote), its record at the given path;
    /// the flag places every group unasked.
    var startRestore: (Profile?, RestoreRequest, String, Bool) -> RestoreJob
    /// Starts the dry run whose plan the profile list shows as "next sync" (nil: none is run,
    /// as in the unit tests of screens).
    var startPreview: ((Profile) -> SyncJob)?
    /// Jobs no screen shows (the profile list's dry runs): stopped, and waited for, when the
    /// session ends, so none is still reading when the process exits.
    private var helpers: [SyncJob] = []

    /// Cancels the helper jobs and waits (up to `seconds`) until they have ended.
    func stopHelpers(waiting seconds: Double = 10) {
        for job in helpers { job.cancel() }
        let deadline = Context.monotonicSeconds() + seconds
        while helpers.contains(where: \.isRunning), Context.monotonicSeconds() < deadline { usleep(10_000) }
        helpers.removeAll()
    }
    /// The exit status of the last job that finished; the session exits with it.
    var lastStatus: ExitStatus?
    /// How the last job that finished ended, in words: printed on the terminal once the
    /// session has given it back, so what happened stays on screen after the interface.
    var lastSummary: String?
    /// Job screens sent to the background (b), oldest first: their jobs go on, and the loop
    /// keeps taking their state; b on the profile list brings one back.
    var background: [any Screen] = []

    /// Takes the background screen of `profile` (or the latest one) out of the background.
    func takeFromBackground(profile: String?) -> (any Screen)? {
        let index = background.lastIndex { ($0 as? ProfileJobScreen)?.profileName == profile } ?? background.indices.last
        guard let index else { return nil }
        return background.remove(at: index)
    }

    init(app: BackupApp, clock: @escaping @Sendable () -> Double = Context.monotonicSeconds, timeZone: TimeZone = .current) {
        self.app = app
        self.clock = clock
        self.timeZone = timeZone
        startSync = { profile, request in SyncJob.start(app: app, profile: profile, request: request, clock: clock) }
        startRestore = { profile, request, record, placeAll in
            RestoreJob.start(app: app, profile: profile, request: request, recordPath: record, placeAll: placeAll, clock: clock)
        }
        startPreview = { [unowned self] profile in
            let job = SyncJob.start(app: app, profile: profile, request: SyncRequest(dryRun: true), clock: clock)
            helpers.removeAll { !$0.isRunning }
            helpers.append(job)
            return job
        }
    }

    /// Runs `body` to its end and returns what it returned, the calling (loop) thread waiting
    /// meanwhile: for a short step a screen needs done before its next frame.
    static func waiting<T: Sendable>(_ body: @escaping @Sendable () async throws(AppError) -> T) throws(AppError) -> T {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Result<T, AppError>?>(nil)
        Task.detached {
            do throws(AppError) {
                let value = try await body()
                result.withLock { $0 = .success(value) }
            } catch {
                result.withLock { $0 = .failure(error) }
            }
            done.signal()
        }
        done.wait()
        guard let outcome = result.withLock({ $0 }) else { throw AppError(.failure, "the step ended without an answer") }
        return try outcome.get()
    }

    @Sendable static func monotonicSeconds() -> Double {
        Double(DispatchTime.now().uptimeNanoseconds) / 1e9
    }

    /// The restore record a restore of `profile` (or of `request.remoteURL` into its target)
    /// keeps, as the restore job chooses it.
    func recordPath(profile: Profile?, request: RestoreRequest) -> String? {
        if let profile, request.remoteURL == nil { return app.paths.restoreRecord(profile: profile.name) }
        guard let target = request.target ?? profile?.source else { return nil }
        return app.paths.restoreRecord(target: Self.absolute(target))
    }

    static func absolute(_ path: String) -> String { BackupApp.absolute(path) }
}

/// A screen that runs a profile's job (sync, restore), as the profile list names it.
protocol ProfileJobScreen: Screen {
    var profileName: String? { get }
}
