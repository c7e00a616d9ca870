// SecretMask: a secret echoed by a server is masked in every form a layer may have encoded
// it in. The password holds a character that changes under each encoding: "@", " ", "&",
// "\"", "/", "<", ">", "+", "é", "'" and "\".

@testable import BackupEngine
@testable import BackupStorage
import BackupTestSupport
import Foundation
import XCTest

final class SecretMaskTests: XCTestCase {
    private let mask = SecretMask(secrets: [EchoedForms.password], user: EchoedForms.user)

    func testEveryEchoedFormOfThePasswordIsMasked() {
        for (name, form) in EchoedForms.all {
            let message = "server said: <error>got \(form) from you</error>"
            XCTAssertEqual(mask.masked(message), "server said: <error>got *** from you</error>", name)
        }
    }

    func testTextWithoutTheSecretIsUntouched() {
        let text = "HTTP 500: p@ss w&rd but not the rest; base64 YWxpY2U6 of the user alone; %40 &amp; \\\""
        XCTAssertEqual(mask.masked(text), text)
    }

    func testEveryOccurrenceIsMasked() {
        let text = EchoedForms.password + " and " + EchoedForms.all[5].1 + " and " + EchoedForms.password
        XCTAssertEqual(mask.masked(text), "*** and *** and ***")
    }

    func testTheBase64FormsDifferFromEachOther() {
        XCTAssertEqual(Set(EchoedForms.all.map(\.1)).count, EchoedForms.all.count, "each form is tested on its own")
    }

    func testAnErrorKeepsItsKindWithItsMessageMasked() {
        let masked = mask.masked(CloudError(.authRevoked, "refused Basic " + EchoedForms.all[5].1))
        XCTAssertEqual(masked.kind, .authRevoked)
        XCTAssertEqual(masked.message, "refused Basic ***")
    }

    func testNoSecretMasksNothing() {
        XCTAssertEqual(SecretMask(secrets: [nil, ""]).masked("anything %20 +"), "anything %20 +")
    }
}
