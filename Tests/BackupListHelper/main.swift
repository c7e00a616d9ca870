// Lists a remote in a process of its own and reports the process's peak memory, for the
// tests where memory is the point (a huge WebDAV listing must not grow with its body):
//
//   BackupListHelper webdav HOST PORT USER FOLDER     (the password in BACKUP_TEST_PASSWORD)
//
// Prints one line "files=N peak_rss_kib=K seconds=S notes=M" and exits 0, or prints the
// error and exits 1. The peak is VmHWM of /proc/self/status, read just before exit.

import BackupEngine
import BackupStorage
import Foundation

let arguments = CommandLine.arguments
guard arguments.count == 6, arguments[1] == "webdav", let port = Int(arguments[3]) else {
    FileHandle.standardError.write(Data("usage: BackupListHelper webdav HOST PORT USER FOLDER\n".utf8))
    exit(2)
}
let endpoint = WebDAVEndpoint(secure: false, host: arguments[2], port: port, user: arguments[4],
                              folder: arguments[5].split(separator: "/").map(String.init))
let storage = WebDAVStorage(endpoint: endpoint, password: ProcessInfo.processInfo.environment["BACKUP_TEST_PASSWORD"])

/// The process's peak resident set (VmHWM), in KiB.
func peakRSS() -> Int {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
}

let started = Date()
do {
    let files = try await storage.list()
    let notes = storage.takeListingNotes()
    print("files=\(files.count) peak_rss_kib=\(peakRSS()) seconds=\(Date().timeIntervalSince(started)) notes=\(notes.count)")
    exit(0)
} catch {
    print("error: \(error) peak_rss_kib=\(peakRSS())")
    exit(1)
}
