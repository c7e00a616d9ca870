// An encrypted profile (`encrypt = yes`): its passphrases, and the one check every job makes
// when it opens its remote, before anything is read from the backup or written to it.
//
// The remote says whether it is encrypted: an encrypted one holds the plain key file
// `.backup-encrypted` at its root (written before the first write of the first sync, or by
// `init --encrypt`). So:
// - a profile that is not encrypted is refused on a remote holding the key file, and an
//   encrypted one on a remote holding a plain backup's marker (`encryptionMismatch`): turning
//   encryption on or off for a backup is never done in place, a new remote is;
// - a passphrase that does not open the key file is `wrongPassphrase`, exit 2, nothing written;
// - a job without a profile (`restore --remote`) takes the encryption the remote says it has.
//
// The passphrases come from the environment (`BACKUP_CRYPT_PASSWORD`, `BACKUP_CRYPT_PASSWORD2`),
// a command of the profile (`crypt_password_command`, `crypt_password2_command`), or, where the
// front end can ask (a terminal), a prompt. None of them is ever written anywhere.

import BackupEngine
import BackupStorage
import Foundation

/// Where an encrypted remote's passphrases come from, and how a front end asks for one.
public enum Encryption {
    /// Whether a profile's settings turn encryption on (`encrypt = yes`).
    public static func isOn(_ settings: [String: String]) -> Bool {
        settings["encrypt"].flatMap(Config.bool) == true
    }

    /// What a front end is asked: the remote's (first) passphrase. The second one, when the
    /// backup has one, comes from the environment or the profile only.
    public struct Question: Sendable {
        public var remote: String
        /// A new backup (init): the answer is asked twice.
        public var confirm: Bool
    }

    /// Asks for a passphrase on the front end (a terminal prompt); nil: none given.
    public typealias Ask = @Sendable (Question) -> String?

    /// Whether a job on `url` for `profile` is encrypted: the profile's setting for its own
    /// remote; nil (the remote says) for a remote named apart from any profile.
    static func of(_ profile: Profile?, url: String) -> Bool? {
        guard let profile, profile.remote == url else { return nil }
        return isOn(profile.settings)
    }

    /// The JSON kinds of the refusals.
    static let wrongPassphraseKind = "wrongPassphrase"
    static let missingPassphraseKind = "missingPassphrase"
    static let mismatchKind = "encryptionMismatch"

    static func wrongPassphrase(_ remote: String, _ detail: String) -> AppError {
        AppError(.usage, "wrong passphrase for the encrypted remote \(remote): \(detail); nothing was read or written. "
            + "Give the passphrase (and the second one, if the backup has one) it was made with", kind: wrongPassphraseKind)
    }

    /// The first passphrase of `settings`' remote, or (`second`) the second one, from the
    /// environment or the profile's command; nil when neither gives it.
    static func passphrase(second: Bool, settings: [String: String], environment: [String: String]) throws(AppError) -> String? {
        let variable = second ? "BACKUP_CRYPT_PASSWORD2" : "BACKUP_CRYPT_PASSWORD"
        let key = second ? "crypt_password2_command" : "crypt_password_command"
        if let value = environment[variable], !value.isEmpty { return value }
        if let command = settings[key] { return try PasswordCommand.run(command, key: key) }
        return nil
    }
}

extension BackupApp {
    /// Opens a job's remote and checks its encryption against the profile's (`encrypted`; nil
    /// for a job without a profile, which takes what the remote says). `lockedAllowed` (the
    /// probe) accepts an encrypted remote without a passphrase: the remote is then opened
    /// plain and `locked`, for the job to say so.
    func openJobRemote(
        _ url: String, settings: [String: String], readOnly: Bool, encrypted: Bool?, lockedAllowed: Bool = false,
        confirmNew: Bool = false
    ) async throws(AppError) -> OpenedRemote {
        var remote = try openRemote(url, settings: settings, readOnly: readOnly)
        guard remote.availability == .available else {
            remote.encrypted = encrypted ?? false
            return remote
        }
        let base = remote.storage
        // Whether the remote holds the key file; nil when it cannot be told now (the job's own
        // first request then says why).
        var holdsKeyFile: Bool?
        var keyFile: Data?
        do {
            keyFile = try await base.readBytes(CryptStorage.keyFileName)
            holdsKeyFile = true
        } catch let error as CloudError where error.kind == .notFound {
            holdsKeyFile = false
        } catch {
            holdsKeyFile = nil
        }
        let wanted = encrypted ?? (holdsKeyFile == true)
        guard wanted else {
            if holdsKeyFile == true {
                throw AppError(.usage, "the remote \(remote.displayURL) holds an encrypted backup (its key file \(CryptStorage.keyFileName)), "
                    + "and this profile is not encrypted; set `encrypt = yes` in the profile and give its passphrase "
                    + "(BACKUP_CRYPT_PASSWORD or crypt_password_command). Nothing was read or written", kind: Encryption.mismatchKind)
            }
            return remote
        }
        remote.encrypted = true
        let configured = try Encryption.passphrase(second: false, settings: settings, environment: environment)
        let first = typedPasswords.passphrase(for: url) ?? configured
            ?? askPassphrase?(Encryption.Question(remote: remote.displayURL, confirm: confirmNew && holdsKeyFile == false))
        guard let first, !first.isEmpty else {
            if lockedAllowed {
                remote.locked = true
                return remote
            }
            throw AppError(.usage, "no passphrase for the encrypted remote \(remote.displayURL): set BACKUP_CRYPT_PASSWORD, "
                + "or `crypt_password_command` in the profile, or run on a terminal to be asked", kind: Encryption.missingPassphraseKind)
        }
        let second = try Encryption.passphrase(second: true, settings: settings, environment: environment)
        let crypt: RcloneCrypt
        do {
            crypt = try RcloneCrypt(passphrase: first, salt: second)
        } catch {
            throw AppError(.failure, "cannot derive the keys of \(remote.displayURL): \(error.message)")
        }
        let scratch = paths.stateFolder + "/scratch"
        do {
            try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw AppError(.failure, "cannot make the folder \(scratch) for encrypted copies: \(error.localizedDescription)")
        }
        let storage = CryptStorage(base: base, crypt: crypt, scratch: scratch)
        remote.storage = storage
        if let keyFile {
            do throws(CryptError) {
                try storage.openKeyFile(keyFile)
            } catch {
                throw Encryption.wrongPassphrase(remote.displayURL, error.message)
            }
            return remote
        }
        guard holdsKeyFile == false else { return remote }
        // No key file: a remote that is new, or one that holds a plain backup (refused), or
        // rclone crypt files made by rclone itself (taken when their names open).
        let listed: RemoteFileList
        do {
            listed = try await base.list()
        } catch {
            return remote  // the job's own listing says why
        }
        if listed.indices.contains(where: { !listed.foreignSpelling(at: $0) && listed.comparePath(at: $0, with: SyncEngine.defaultMarkerPath) == 0 }) {
            throw AppError(.usage, "the remote \(remote.displayURL) holds a backup that is not encrypted (its marker "
                + "\(SyncEngine.defaultMarkerPath) is plain), and this profile is encrypted; an encrypted backup needs a new, "
                + "empty remote. Nothing was read or written", kind: Encryption.mismatchKind)
        }
        let sample = listed.indices.lazy.filter { !listed.foreignSpelling(at: $0) }.prefix(64)
        if !sample.isEmpty, !sample.contains(where: { (try? crypt.decryptPath(listed.path(at: $0))) != nil }) {
            throw Encryption.wrongPassphrase(remote.displayURL, "none of the remote's file names opens with it (or they are "
                + "not an encrypted backup's)")
        }
        return remote
    }
}
