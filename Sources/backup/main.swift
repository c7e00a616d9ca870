import BackupCLI
import Foundation

exit(await BackupCLI.main(CommandLine.arguments))
