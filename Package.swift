// swift-tools-version:6.0
// The layers of DESIGN.md: every target may import only what sits above it in this file.
import PackageDescription

let package = Package(
    name: "backup",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "backup", targets: ["backup"]),
    ],
    targets: [
        // MARK: C system libraries (a modulemap and one shim header each)
        // No pkgConfig: its -D flags are refused by SwiftPM (a warning); the shim defines them.
        .systemLibrary(name: "CCurses", path: "Sources/CCurses"),
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", pkgConfig: "zlib"),
        .systemLibrary(name: "CCrypto", path: "Sources/CCrypto", pkgConfig: "libcrypto"),
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3"),
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl"),
        .systemLibrary(name: "CMalloc", path: "Sources/CMalloc"),
        .systemLibrary(name: "CLinux", path: "Sources/CLinux"),
        .systemLibrary(name: "CSodium", path: "Sources/CSodium", pkgConfig: "libsodium"),
        .systemLibrary(name: "CSSH2", path: "Sources/CSSH2", pkgConfig: "libssh2"),

        // MARK: The contract: value types, RemoteStorage, SyncEngine, probe, hold, SQLite state
        .target(name: "BackupEngine", dependencies: ["CSQLite", "CCrypto", "CMalloc", "CLinux"]),

        // MARK: Providers behind RemoteStorage (FolderStorage is the embedded default)
        .target(name: "BackupStorage", dependencies: ["BackupEngine", "CCurl", "CCrypto", "CSodium", "CSSH2"]),

        // MARK: The local side: scanning, the marker codec, patterns, restore placement
        .target(name: "BackupTree", dependencies: ["BackupEngine", "CCrypto", "CLinux", "CZlib"]),

        // MARK: Profiles, config, locks and the jobs every front end runs
        .target(name: "BackupApp", dependencies: ["BackupEngine", "BackupStorage", "BackupTree"]),

        // MARK: All ncurses contact: the Terminal protocol, CursesTerminal, ScreenBuffer for tests
        .target(name: "BackupTerminal", dependencies: ["CCurses"]),

        // MARK: Screens and the one input/draw loop
        .target(name: "BackupTUI", dependencies: ["BackupTerminal", "BackupApp", "BackupEngine", "BackupTree"]),

        // MARK: The command tree as data, parsing, help, one file per command, exit codes
        .target(name: "BackupCLI", dependencies: ["BackupApp", "BackupTUI", "BackupEngine", "BackupStorage", "BackupTree"]),

        // MARK: The executable: main.swift only
        .executableTarget(name: "backup", dependencies: ["BackupCLI", "CMalloc"]),

        // MARK: Tests
        .target(
            name: "BackupTestSupport",
            dependencies: ["BackupEngine", "BackupStorage"],
            path: "Tests/BackupTestSupport"
        ),
        .executableTarget(
            name: "BackupKillHelper",
            dependencies: ["BackupEngine", "BackupStorage", "BackupTree", "BackupTestSupport"],
            path: "Tests/BackupKillHelper"
        ),
        .executableTarget(
            name: "BackupListHelper",
            dependencies: ["BackupEngine", "BackupStorage"],
            path: "Tests/BackupListHelper"
        ),
        .executableTarget(
            name: "BackupCryptBench",
            dependencies: ["BackupStorage"],
            path: "Tests/BackupCryptBench"
        ),
        .testTarget(name: "BackupEngineTests", dependencies: ["BackupEngine", "BackupStorage", "BackupTestSupport"]),
        .testTarget(
            name: "BackupStorageTests", dependencies: ["BackupEngine", "BackupStorage", "BackupTestSupport", "BackupListHelper"]
        ),
        .testTarget(
            name: "BackupAppTests",
            dependencies: ["BackupApp", "BackupCLI", "BackupEngine", "BackupStorage", "BackupTree", "BackupTestSupport", "backup"]
        ),
        .testTarget(
            name: "BackupTUITests",
            dependencies: ["BackupTUI", "BackupTerminal", "BackupApp", "BackupEngine", "BackupTestSupport", "backup"]
        ),
        .testTarget(
            name: "BackupTreeTests",
            dependencies: ["BackupEngine", "BackupTree", "BackupStorage", "BackupTestSupport", "BackupKillHelper"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
