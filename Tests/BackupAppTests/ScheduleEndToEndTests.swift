// `backup schedule` through the binary: the units it writes into a temporary XDG_CONFIG_HOME
// pass the real `systemd-analyze verify --user` for each instance, enabling is skipped and said
// so when no user manager runs, --off removes what it wrote, the list and `backup profiles`
// show it, the service's command line really syncs, the cron line is given (and really syncs)
// where there is no systemd, and a scheduled run logs one line per event with its priority.

import BackupTestSupport
import Foundation
import XCTest

final class ScheduleEndToEndTests: XCTestCase {
    /// A CLI fixture with a private XDG_RUNTIME_DIR (no user manager in it).
    private func fixture() throws -> CLIFixture {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let runtime = try f.dir.makeFolder("runtime")
        chmod(runtime, 0o700)
        f.extraEnvironment["XDG_RUNTIME_DIR"] = runtime
        f.extraEnvironment["BACKUP_SCHEDULED"] = ""
        f.extraEnvironment["JOURNAL_STREAM"] = ""
        return f
    }

    private func unitFolder(_ f: CLIFixture) -> String { f.dir.path("config/systemd/user") }

    /// A package's template units on this machine (a dev machine with the .deb installed).
    private var packagedTemplates: Bool {
        ["/etc/systemd/user", "/usr/local/lib/systemd/user", "/usr/lib/systemd/user", "/lib/systemd/user"]
            .contains { FileManager.default.fileExists(atPath: $0 + "/backup@.service") }
    }

    /// Runs `tool arguments` with the fixture's environment; (status, stdout + stderr).
    private func tool(_ f: CLIFixture, _ path: String, _ arguments: [String]) throws -> (Int32, String) {
        try Self.run(path, arguments, environment: f.environment)
    }

    /// Runs `path arguments` with exactly `environment`; (status, stdout + stderr).
    static func run(_ path: String, _ arguments: [String], environment: [String: String]) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.environment = environment
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }

    private func verify(_ f: CLIFixture, _ units: [String]) throws -> (Int32, String) {
        try tool(f, "/usr/bin/systemd-analyze", ["verify", "--user"] + units)
    }

    func testScheduleWritesUnitsThatSystemdAnalyzeVerifyAcceptsAndSaysEnablingWasSkipped() throws {
        let f = try fixture()
        try f.write("a.txt", "a")
        XCTAssertEqual(try f.run("init", "--profile", "t", "--source", f.source, "--remote", f.remote).status, 0)
        XCTAssertEqual(try f.run("init", "--profile", "my-laptop.home", "--source", f.source, "--remote", f.dir.path("other")).status, 0)

        for (profile, every) in [("t", "daily"), ("my-laptop.home", "45m")] {
            let run = try f.run("schedule", "--profile", profile, "--every", every, "--json")
            XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
            let result = try XCTUnwrap(run.result)
            let timer = try XCTUnwrap(result["timer"] as? String)
            XCTAssertEqual(result["enabled"] as? Bool, false)
            let skipped = try XCTUnwrap(result["enable_skipped"] as? String)
            XCTAssertTrue(skipped.contains("no systemd user manager") && skipped.contains("systemctl --user enable --now \(timer)"), skipped)
            XCTAssertTrue((result["warnings"] as? [String] ?? []).contains { $0.contains("has not synced yet") })
            let linger = FileManager.default.fileExists(atPath: "/var/lib/systemd/linger/" + (ProcessInfo.processInfo.environment["USER"] ?? "root"))
            XCTAssertEqual((result["warnings"] as? [String] ?? []).contains { $0.contains("lingering is off") }, !linger)
            let service = timer.replacingOccurrences(of: ".timer", with: ".service")
            let (status, said) = try verify(f, [timer, service])
            XCTAssertEqual(status, 0, "systemd-analyze verify --user \(timer) \(service): \(said)")
            XCTAssertEqual(said.trimmingCharacters(in: .whitespacesAndNewlines), "", "verify warned")
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: unitFolder(f) + "/backup@my\\x2dlaptop.home.timer.d/schedule.conf"),
                      "the instance is named as systemd-escape names it")
        let timerText = try String(contentsOfFile: unitFolder(f) + "/backup@t.timer.d/schedule.conf", encoding: .utf8)
        XCTAssertTrue(timerText.contains("OnCalendar=daily\n") && timerText.contains("RandomizedDelaySec=30min\n"), timerText)
        if !packagedTemplates {
            let service = try String(contentsOfFile: unitFolder(f) + "/backup@.service", encoding: .utf8)
            for setting in ["Environment=BACKUP_SCHEDULED=1\n", "Nice=10\n", "IOSchedulingClass=idle\n", "Type=oneshot\n",
                            "ExecStart=\"\(try realBinary())\" sync --profile %I --no-tui\n"] {
                XCTAssertTrue(service.contains(setting), "backup@.service lacks \(setting): \(service)")
            }
            let timer = try String(contentsOfFile: unitFolder(f) + "/backup@.timer", encoding: .utf8)
            XCTAssertTrue(timer.contains("Persistent=true\n") && timer.contains("WantedBy=timers.target\n"), timer)
        }

        // The same check fails on a unit that is wrong: the test can fail.
        try Data("# Written by backup schedule\n[Timer]\nOnCalendar=someday\n".utf8)
            .write(to: URL(fileURLWithPath: unitFolder(f) + "/backup@t.timer.d/schedule.conf"))
        XCTAssertNotEqual(try verify(f, ["backup@t.timer"]).0, 0)
        XCTAssertEqual(try f.run("schedule", "--profile", "t", "--every", "6h").status, 0, "scheduling again rewrites the drop-in")
        XCTAssertEqual(try verify(f, ["backup@t.timer"]).0, 0)
        XCTAssertTrue(try String(contentsOfFile: unitFolder(f) + "/backup@t.timer.d/schedule.conf", encoding: .utf8).contains("OnCalendar=00/6:00:00"))
    }

    func testTheListProfilesAndOffShowAndRemoveTheTimer() throws {
        let f = try fixture()
        try f.write("a.txt", "a")
        XCTAssertEqual(try f.run("init", "--profile", "t", "--source", f.source, "--remote", f.remote).status, 0)
        XCTAssertEqual(try f.run("init", "--profile", "u", "--source", f.source, "--remote", f.dir.path("u")).status, 0)
        XCTAssertTrue(try f.run("schedule").stdout.contains("no profile is scheduled"))
        XCTAssertEqual(try f.run("schedule", "--profile", "t", "--every", "hourly").status, 0)

        let list = try XCTUnwrap(try f.run("schedule", "--json").result?["schedules"] as? [[String: Any]])
        XCTAssertEqual(list.count, 1)
        XCTAssertEqual(list.first?["profile"] as? String, "t")
        XCTAssertEqual(list.first?["every"] as? String, "hourly")
        XCTAssertEqual(list.first?["enabled"] as? Bool, false)
        let profiles = try XCTUnwrap(try f.run("profiles", "--json").result?["profiles"] as? [[String: Any]])
        XCTAssertEqual((profiles.first { $0["name"] as? String == "t" }?["schedule"] as? [String: Any])?["every"] as? String, "hourly")
        XCTAssertTrue(profiles.first { $0["name"] as? String == "u" }?["schedule"] is NSNull)
        XCTAssertTrue(try f.run("profiles").stdout.contains("scheduled every hourly"))

        // An enabled timer's link (what `systemctl --user enable` makes) is listed, and removed by --off.
        let wants = try f.dir.makeFolder("config/systemd/user/timers.target.wants")
        XCTAssertEqual(symlink("../backup@.timer", wants + "/backup@t.timer"), 0)
        XCTAssertEqual((try f.run("schedule", "--json").result?["schedules"] as? [[String: Any]])?.first?["enabled"] as? Bool, true)

        let off = try f.run("schedule", "--profile", "t", "--off", "--json")
        XCTAssertEqual(off.status, 0, off.stdout + off.stderr)
        XCTAssertEqual((off.result?["removed"] as? [String])?.count, 3)
        for gone in ["backup@t.timer.d", "backup@t.service.d", "timers.target.wants/backup@t.timer"] {
            XCTAssertFalse(FileManager.default.fileExists(atPath: unitFolder(f) + "/" + gone), gone)
        }
        XCTAssertTrue(try f.run("schedule").stdout.contains("no profile is scheduled"))
        XCTAssertTrue(try f.run("schedule", "--profile", "t", "--off").stdout.contains("nothing removed"))
        XCTAssertEqual(try f.run("schedule", "--profile", "t", "--every", "daily", "--off").status, 2)
        XCTAssertEqual(try f.run("schedule", "--profile", "t", "--every", "fortnightly").status, 2)
        XCTAssertEqual(try f.run("schedule", "--profile", "nobody-here", "--every", "daily").status, 2)
    }

    func testTheServiceCommandLineSyncsTheProfileAsAScheduledRun() throws {
        let f = try fixture()
        let config = f.dir.path("elsewhere/my.conf")
        try f.write("a.txt", "a")
        XCTAssertEqual(try f.run("--config", config, "init", "--profile", "t", "--source", f.source, "--remote", f.remote).status, 0)
        XCTAssertEqual(try f.run("--config", config, "sync", "--profile", "t", "--yes").status, 0)
        let run = try f.run("--config", config, "schedule", "--profile", "t", "--every", "daily", "--json")
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        XCTAssertFalse((run.result?["warnings"] as? [String] ?? []).contains { $0.contains("has not synced yet") })
        XCTAssertEqual(try verify(f, ["backup@t.service", "backup@t.timer"]).0, 0)

        // What systemd would run: the drop-in's ExecStart (it names the --config) with the
        // service's environment, and nothing of this test's XDG variables.
        let dropIn = try String(contentsOfFile: unitFolder(f) + "/backup@t.service.d/schedule.conf", encoding: .utf8)
        let exec = try XCTUnwrap(dropIn.split(separator: "\n").last { $0.hasPrefix("ExecStart=") && $0.count > "ExecStart=".count })
        var words = try Self.words(String(exec.dropFirst("ExecStart=".count))).map { $0 == "%I" ? "t" : $0 }
        XCTAssertTrue(words.contains(config), "the drop-in runs the --config given: \(exec)")
        var environment = ["PATH": "/usr/bin:/bin", "HOME": f.dir.path("home"), "BACKUP_SCHEDULED": "1", "JOURNAL_STREAM": "8:1"]
        for line in dropIn.split(separator: "\n") where line.hasPrefix("Environment=") {
            let assignment = try XCTUnwrap(try Self.words(String(line.dropFirst("Environment=".count))).first)
            let parts = assignment.split(separator: "=", maxSplits: 1).map(String.init)
            environment[parts[0]] = parts[1]
        }
        XCTAssertEqual(environment["XDG_STATE_HOME"], f.dir.path("state"))
        try f.write("b.txt", "b")
        let executable = words.removeFirst()
        let (status, said) = try Self.run(executable, words, environment: environment)
        XCTAssertEqual(status, 0, said)
        XCTAssertEqual(try f.tree(f.remote)["b.txt"], Data("b".utf8), said)
        for line in said.split(separator: "\n") {
            XCTAssertTrue(line.first == "<" && line.dropFirst(2).first == ">", "a journal line without its priority: \(line)")
        }
        XCTAssertFalse(said.contains("\r"), "a scheduled run redrew a progress line")
    }

    func testWithoutSystemdTheCronLineIsGivenAndItSyncs() throws {
        let f = try fixture()
        try f.write("a.txt", "a")
        XCTAssertEqual(try f.run("init", "--profile", "t", "--source", f.source, "--remote", f.remote).status, 0)
        XCTAssertEqual(try f.run("sync", "--profile", "t", "--yes").status, 0)
        let bare = try f.dir.makeFolder("bare-path")  // a PATH without systemctl
        f.extraEnvironment["PATH"] = bare
        let run = try f.run("schedule", "--profile", "t", "--every", "hourly", "--json")
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        XCTAssertEqual(run.result?["systemd"] as? Bool, false)
        XCTAssertTrue(run.result?["timer"] is NSNull)
        XCTAssertFalse(FileManager.default.fileExists(atPath: unitFolder(f)), "no units without systemd")
        let line = try XCTUnwrap(run.result?["cron"] as? String)
        let fields = line.split(separator: " ", maxSplits: 5)
        XCTAssertEqual(fields.count, 6)
        XCTAssertNotNil(Int(fields[0]), line)
        XCTAssertEqual(fields[1...4].joined(separator: " "), "* * * *", line)
        XCTAssertTrue(try f.run("schedule", "--profile", "t", "--every", "hourly").stdout.contains("crontab"))

        // cron runs the command with /bin/sh and a bare environment.
        try f.write("c.txt", "c")
        let (status, said) = try Self.run("/bin/sh", ["-c", String(fields[5])],
                                          environment: ["PATH": "/usr/bin:/bin", "HOME": f.dir.path("home"), "SHELL": "/bin/sh"])
        XCTAssertEqual(status, 0, said)
        XCTAssertEqual(try f.tree(f.remote)["c.txt"], Data("c".utf8), said)
        XCTAssertFalse(said.contains("%"), said)
    }

    func testAScheduledRunLogsOneLinePerEventWithItsPriority() throws {
        let f = try fixture()
        for index in 0..<400 { try f.write("f\(index).txt", "\(index)") }
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote).status, 0)
        f.extraEnvironment["BACKUP_SCHEDULED"] = "1"
        f.extraEnvironment["JOURNAL_STREAM"] = "8:12345"
        let refused = try f.run("sync")
        XCTAssertEqual(refused.status, 3, "a scheduled run never consents to a first sync")
        XCTAssertTrue(refused.stdout.hasPrefix("<3>"), refused.stdout)
        XCTAssertFalse(FileManager.default.fileExists(atPath: f.remote + "/f1.txt"))

        XCTAssertEqual(try f.run("sync", "--yes").status, 0)
        try f.write("new.txt", "new")
        let run = try f.run("sync")
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = (run.stderr + run.stdout).split(separator: "\n")
        for line in lines {
            XCTAssertTrue(line.hasPrefix("<6>") || line.hasPrefix("<5>"), "a line without its journal priority: \(line)")
        }
        XCTAssertFalse(run.stderr.contains("\r"))
        let progress = lines.filter { $0.contains(" steps, ") }
        XCTAssertEqual(progress.count, 1, "progress is logged once, when done: \(progress)")
        XCTAssertTrue(run.stdout.hasPrefix("<6>synced"), run.stdout)

        // Without the journal, the same lines without prefixes.
        f.extraEnvironment["JOURNAL_STREAM"] = ""
        let plain = try f.run("sync")
        XCTAssertFalse((plain.stderr + plain.stdout).contains("<6>"))
    }

    /// The words of a unit file command line (double quotes with backslash escapes).
    static func words(_ line: String) throws -> [String] {
        var words: [String] = []
        var current = ""
        var quoted = false
        var escaped = false
        var any = false
        for character in line {
            if escaped {
                current.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "\"" {
                quoted.toggle()
                any = true
            } else if character == " " && !quoted {
                if any || !current.isEmpty { words.append(current) }
                current = ""
                any = false
            } else {
                current.append(character)
            }
        }
        if any || !current.isEmpty { words.append(current) }
        return words.map { $0.replacingOccurrences(of: "%%", with: "%").replacingOccurrences(of: "$$", with: "$") }
    }

    private func realBinary() throws -> String {
        URL(fileURLWithPath: CLIFixture.binary).resolvingSymlinksInPath().path
    }
}
