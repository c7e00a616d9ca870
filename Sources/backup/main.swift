import BackupCLI
import Foundation
#if canImport(Glibc)
import CMalloc

// glibc gives each thread that allocates its own arena (up to 8 per core), and memory freed
// in one arena is not reused by another. A restore plans on one thread and downloads on the
// others, so the plan's freed memory stayed in the process beside the run's: at 200,000 files
// 2 arenas peaked at 355 MiB where the default reached 428 MiB (scripts/bench-scale). The
// threads here are few and mostly wait on I/O, so contention for 2 arenas costs nothing measurable.
mallopt(M_ARENA_MAX, 2)
#endif

exit(await BackupCLI.main(CommandLine.arguments))
