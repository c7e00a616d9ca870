// Parsing remote URLs into locations, the errors for malformed ones (naming the URL, never a
// password), the credentials and options read from the environment, and the factory.

import BackupEngine
@testable import BackupStorage
import Foundation
import XCTest

final class RemoteURLTests: XCTestCase {
    func testPlainPathsAndFileURLsAreFolders() throws {
        XCTAssertEqual(try RemoteURL.parse("/mnt/usb/backup"), .folder("/mnt/usb/backup"))
        XCTAssertEqual(try RemoteURL.parse("relative/folder"), .folder("relative/folder"))
        XCTAssertEqual(try RemoteURL.parse("file:///mnt/usb/my%20backup"), .folder("/mnt/usb/my backup"))
        XCTAssertEqual(try RemoteURL.parse("file://localhost/srv/b"), .folder("/srv/b"))
    }

    func testWebDAVURLs() throws {
        XCTAssertEqual(try RemoteURL.parse("webdav://nas.local/backups"),
                       .webdav(WebDAVEndpoint(secure: false, host: "nas.local", folder: ["backups"])))
        XCTAssertEqual(try RemoteURL.parse("webdavs://alice@cloud.example.com:8443/remote.php/dav/files/alice/My%20Backup/"),
                       .webdav(WebDAVEndpoint(secure: true, host: "cloud.example.com", port: 8443, user: "alice",
                                              folder: ["remote.php", "dav", "files", "alice", "My Backup"])))
        XCTAssertEqual(try RemoteURL.parse("webdav://alice%40example.com@[::1]:8080"),
                       .webdav(WebDAVEndpoint(secure: false, host: "[::1]", port: 8080, user: "alice@example.com")))
    }

    func testWebDAVEndpointBuildsEncodedURLsWithoutCredentials() throws {
        guard case .webdav(let endpoint) = try RemoteURL.parse("webdavs://bob@host:444/a%20b/Ü") else {
            return XCTFail("not WebDAV")
        }
        XCTAssertEqual(endpoint.server, "https://host:444")
        XCTAssertEqual(endpoint.folderURL, "https://host:444/a%20b/%C3%9C/")
        XCTAssertEqual(endpoint.displayURL, "webdavs://bob@host:444/a b/Ü")
    }

    func testS3URLs() throws {
        XCTAssertEqual(try RemoteURL.parse("s3://my-bucket"), .s3(S3Location(bucket: "my-bucket")))
        XCTAssertEqual(try RemoteURL.parse("s3://my-bucket/machines/laptop/"),
                       .s3(S3Location(bucket: "my-bucket", prefix: ["machines", "laptop"])))
    }

    func testMalformedURLsNameTheURLAndWhatIsWrong() {
        let cases: [(String, String)] = [
            ("ftp://host/x", "not a known kind of remote"),
            ("sftp:host/x", "not a known kind of remote"),
            ("webdav:///path", "no host"),
            ("webdav://host:99999/x", "port"),
            ("webdav://host:abc/x", "port"),
            ("webdav://host/a//b", "empty"),
            ("webdav://host/a/../b", "\"..\""),
            ("webdav://host/x?y=1", "query"),
            ("s3://", "no bucket"),
            ("s3://Bad_Bucket!/x", "not a bucket name"),
            ("s3://ab", "not a bucket name"),
            ("file://otherhost/x", "takes no host"),
            ("", "empty"),
        ]
        for (url, expected) in cases {
            do {
                _ = try RemoteURL.parse(url)
                XCTFail("\(url) was accepted")
            } catch let error as RemoteSetupError {
                XCTAssertEqual(error.kind, .invalidURL, url)
                XCTAssertTrue(error.message.contains(String(reflecting: url)), error.message)
                XCTAssertTrue(error.message.contains(expected), "\(url): \(error.message)")
            } catch {
                XCTFail("\(url): \(error)")
            }
        }
    }

    func testAPasswordInTheURLIsRefusedAndMasked() {
        for url in ["webdavs://alice:Sup3rSecret@host/x", "s3://KEY:Sup3rSecret@bucket/x"] {
            do {
                _ = try RemoteURL.parse(url)
                XCTFail("\(url) was accepted")
            } catch let error as RemoteSetupError {
                XCTAssertFalse(error.message.contains("Sup3rSecret"), error.message)
                XCTAssertTrue(error.message.contains("***"), error.message)
            } catch {
                XCTFail("\(error)")
            }
        }
    }

    func testCredentialsAndOptionsComeFromTheEnvironment() {
        let environment = [
            "BACKUP_PASSWORD": "pw", "AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_SESSION_TOKEN": "",
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-central-1",
        ]
        let credentials = ProviderCredentials.fromEnvironment(environment)
        XCTAssertEqual(credentials.webdavPassword, "pw")
        XCTAssertEqual(credentials.awsAccessKeyId, "AK")
        XCTAssertEqual(credentials.awsSecretAccessKey, "SK")
        XCTAssertNil(credentials.awsSessionToken, "an empty variable counts as absent")
        let options = ProviderOptions.fromEnvironment(environment)
        XCTAssertEqual(options.s3Endpoint, "http://127.0.0.1:9000")
        XCTAssertEqual(options.s3Region, "eu-central-1")
        XCTAssertEqual(ProviderOptions.fromEnvironment(["AWS_ENDPOINT_URL_S3": "https://a", "AWS_ENDPOINT_URL": "https://b",
                                                        "AWS_DEFAULT_REGION": "r"]).s3Endpoint, "https://a")
    }

    func testCredentialsNeverPrintASecret() {
        let credentials = ProviderCredentials(webdavUser: "alice", webdavPassword: "pw-secret",
                                              awsAccessKeyId: "AK", awsSecretAccessKey: "sk-secret", awsSessionToken: "tok-secret")
        let printed = "\(credentials) \(String(reflecting: credentials))"
        for secret in ["pw-secret", "sk-secret", "tok-secret"] {
            XCTAssertFalse(printed.contains(secret), printed)
        }
        XCTAssertTrue(printed.contains("alice") && printed.contains("AK"), printed)
    }

    func testFactoryMakesTheRightProviderOrSaysWhatIsMissing() throws {
        XCTAssertTrue(try makeStorage("/mnt/x", credentials: ProviderCredentials(), options: ProviderOptions()) is FolderStorage)
        let webdav = try makeStorage("webdav://alice@host/x", credentials: ProviderCredentials(webdavPassword: "p"),
                                     options: ProviderOptions())
        XCTAssertEqual((webdav as? WebDAVStorage)?.endpoint.user, "alice")
        let fromProfile = try makeStorage("webdav://host/x", credentials: ProviderCredentials(webdavUser: "bob", webdavPassword: "p"),
                                          options: ProviderOptions())
        XCTAssertEqual((fromProfile as? WebDAVStorage)?.endpoint.user, "bob")

        var options = ProviderOptions()
        options.s3Endpoint = "http://127.0.0.1:9000/"
        let s3 = try makeStorage("s3://bucket/p", credentials: ProviderCredentials(awsAccessKeyId: "a", awsSecretAccessKey: "b"),
                                 options: options)
        XCTAssertEqual((s3 as? S3Storage)?.endpoint, "http://127.0.0.1:9000")
        XCTAssertEqual((s3 as? S3Storage)?.pathStyle, true, "a custom endpoint uses path style")
        let aws = try makeStorage("s3://bucket/p", credentials: ProviderCredentials(awsAccessKeyId: "a", awsSecretAccessKey: "b"),
                                  options: ProviderOptions())
        XCTAssertEqual((aws as? S3Storage)?.endpoint, "https://s3.us-east-1.amazonaws.com")
        XCTAssertEqual((aws as? S3Storage)?.pathStyle, false)

        for (url, credentials, needle) in [
            ("webdav://alice@host/x", ProviderCredentials(), "BACKUP_PASSWORD"),
            ("s3://bucket/x", ProviderCredentials(awsAccessKeyId: "a"), "AWS_SECRET_ACCESS_KEY"),
        ] {
            XCTAssertThrowsError(try makeStorage(url, credentials: credentials, options: ProviderOptions())) { error in
                XCTAssertEqual((error as? RemoteSetupError)?.kind, .missingCredential)
                XCTAssertTrue("\(error)".contains(needle), "\(error)")
            }
        }
        var badEndpoint = ProviderOptions()
        badEndpoint.s3Endpoint = "127.0.0.1:9000"
        XCTAssertThrowsError(try makeStorage("s3://bucket", credentials: ProviderCredentials(awsAccessKeyId: "a", awsSecretAccessKey: "b"),
                                             options: badEndpoint)) { error in
            XCTAssertEqual((error as? RemoteSetupError)?.kind, .invalidOption)
        }
        var noTransfers = ProviderOptions()
        noTransfers.transfers = 0
        XCTAssertThrowsError(try makeStorage("/x", credentials: ProviderCredentials(), options: noTransfers))
    }

    func testHrefsArePathsOrFullURLsAndAreDecoded() {
        XCTAssertEqual(WebDAVStorage.hrefComponents("/dav/a%20b/c/"), ["dav", "a b", "c"])
        XCTAssertEqual(WebDAVStorage.hrefComponents("https://host:8443/dav/%C3%9C.txt"), ["dav", "Ü.txt"])
    }
}
