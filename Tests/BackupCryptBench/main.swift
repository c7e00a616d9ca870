// For scripts/bench-crypt only: seals one local file into another in rclone crypt's format on
// one thread, as CryptStorage does for an upload, and opens it again, printing the speed and
// the thread's CPU time of each. Not a test and not installed.
//
//   BackupCryptBench PLAIN SEALED OPENED     (SEALED /dev/null: sealing only)

import BackupStorage
import Foundation
#if canImport(Glibc)
import Glibc
#endif

func cpuSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

func measure(_ what: String, bytes: Int64, _ body: () throws -> Void) rethrows {
    let wall = Date()
    let cpu = cpuSeconds()
    try body()
    let seconds = Date().timeIntervalSince(wall)
    let used = cpuSeconds() - cpu
    let mib = Double(bytes) / 1_048_576
    print(String(format: "%@: %.0f MiB in %.2f s = %.0f MiB/s (CPU %.2f s: %.0f MiB/s of one core)", what, mib, seconds, mib / seconds, used, mib / used))
}

let arguments = CommandLine.arguments
guard arguments.count == 4 else {
    FileHandle.standardError.write(Data("usage: BackupCryptBench PLAIN SEALED OPENED\n".utf8))
    exit(2)
}
do {
    let crypt = try RcloneCrypt(passphrase: "bench passphrase")
    let source = open(arguments[1], O_RDONLY)
    var info = stat()
    guard source >= 0, fstat(source, &info) == 0 else { throw CryptError(.system, "cannot open \(arguments[1])") }
    let sealed = open(arguments[2], O_RDWR | O_CREAT | O_TRUNC, 0o600)
    let opened = open(arguments[3], O_RDWR | O_CREAT | O_TRUNC, 0o600)
    guard sealed >= 0, opened >= 0 else { throw CryptError(.system, "cannot create the output files") }
    try measure("seal", bytes: Int64(info.st_size)) { _ = try crypt.encryptFile(from: source, to: sealed) }
    // Sealed into /dev/null: the sealing alone, without the cost of filling a new file.
    if arguments[2] != "/dev/null" {
        try measure("open", bytes: Int64(info.st_size)) { _ = try crypt.decryptFile(from: sealed, to: opened) }
    }
} catch {
    FileHandle.standardError.write(Data("BackupCryptBench: \(error)\n".utf8))
    exit(1)
}
