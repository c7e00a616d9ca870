// The SigV4 signer against AWS's published examples: the Signature Version 4 test suite
// (get-vanilla, get-vanilla-query-order-key-case, post-vanilla) and the S3 API reference's
// header-based examples (GET Object with a range, PUT Object, GET Bucket Lifecycle, GET Bucket).

import BackupEngine
@testable import BackupStorage
import Foundation
import XCTest

final class SigV4Tests: XCTestCase {
    private let suite = SigV4Signer(accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                                    sessionToken: nil, region: "us-east-1", service: "service")
    private let s3 = SigV4Signer(accessKeyId: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                                 sessionToken: nil, region: "us-east-1", service: "s3")
    private let suiteTime = "20150830T123600Z"
    private let s3Time = "20130524T000000Z"
    private let s3Host = ("host", "examplebucket.s3.amazonaws.com")

    func testTestSuiteGetVanilla() {
        let authorization = suite.authorization(
            method: "GET", path: "/", query: [], headers: [("Host", "example.amazonaws.com"), ("X-Amz-Date", suiteTime)],
            payloadHash: SigV4Signer.emptyPayloadHash, timestamp: suiteTime)
        XCTAssertEqual(authorization, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            + "SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
    }

    func testTestSuiteGetVanillaQueryOrderKeyCase() {
        let authorization = suite.authorization(
            method: "GET", path: "/", query: [("Param2", "value2"), ("Param1", "value1")],
            headers: [("Host", "example.amazonaws.com"), ("X-Amz-Date", suiteTime)],
            payloadHash: SigV4Signer.emptyPayloadHash, timestamp: suiteTime)
        XCTAssertTrue(authorization.hasSuffix("Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
                      authorization)
    }

    func testTestSuitePostVanilla() {
        let authorization = suite.authorization(
            method: "POST", path: "/", query: [], headers: [("Host", "example.amazonaws.com"), ("X-Amz-Date", suiteTime)],
            payloadHash: SigV4Signer.emptyPayloadHash, timestamp: suiteTime)
        XCTAssertTrue(authorization.hasSuffix("Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
                      authorization)
    }

    func testS3GetObjectWithRange() {
        let headers = [s3Host, ("Range", "bytes=0-9"), ("x-amz-content-sha256", SigV4Signer.emptyPayloadHash),
                       ("x-amz-date", s3Time)]
        let (canonical, signed) = SigV4Signer.canonicalRequest(
            method: "GET", path: "/test.txt", query: [], headers: headers, payloadHash: SigV4Signer.emptyPayloadHash)
        XCTAssertEqual(signed, "host;range;x-amz-content-sha256;x-amz-date")
        XCTAssertTrue(SigV4Signer.stringToSign(timestamp: s3Time, scope: "20130524/us-east-1/s3/aws4_request",
                                               canonicalRequest: canonical)
            .hasSuffix("7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972"))
        let authorization = s3.authorization(method: "GET", path: "/test.txt", query: [], headers: headers,
                                             payloadHash: SigV4Signer.emptyPayloadHash, timestamp: s3Time)
        XCTAssertTrue(authorization.hasSuffix("Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"),
                      authorization)
    }

    func testS3PutObjectEncodesTheKeyAndSignsThePayloadHash() {
        let payload = "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"
        XCTAssertEqual(SHA256Hasher.hex(Data("Welcome to Amazon S3.".utf8)), payload)
        let path = "/" + SigV4Signer.uriEncode("test$file.text", keepSlash: true)
        XCTAssertEqual(path, "/test%24file.text")
        let authorization = s3.authorization(
            method: "PUT", path: path, query: [],
            headers: [("Date", "Fri, 24 May 2013 00:00:00 GMT"), s3Host, ("x-amz-content-sha256", payload),
                      ("x-amz-date", s3Time), ("x-amz-storage-class", "REDUCED_REDUNDANCY")],
            payloadHash: payload, timestamp: s3Time)
        XCTAssertEqual(authorization, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            + "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class, "
            + "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")
    }

    func testS3GetBucketLifecycleWithAValuelessParameter() {
        let authorization = s3.authorization(
            method: "GET", path: "/", query: [("lifecycle", "")],
            headers: [s3Host, ("x-amz-content-sha256", SigV4Signer.emptyPayloadHash), ("x-amz-date", s3Time)],
            payloadHash: SigV4Signer.emptyPayloadHash, timestamp: s3Time)
        XCTAssertTrue(authorization.hasSuffix("Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"),
                      authorization)
    }

    func testS3GetBucketSortsTheQuery() {
        let authorization = s3.authorization(
            method: "GET", path: "/", query: [("prefix", "J"), ("max-keys", "2")],
            headers: [s3Host, ("x-amz-content-sha256", SigV4Signer.emptyPayloadHash), ("x-amz-date", s3Time)],
            payloadHash: SigV4Signer.emptyPayloadHash, timestamp: s3Time)
        XCTAssertTrue(authorization.hasSuffix("Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"),
                      authorization)
    }

    func testHeadersToAddCarryTheDateThePayloadHashAndTheSessionToken() {
        let signer = SigV4Signer(accessKeyId: "AK", secretAccessKey: "SK", sessionToken: "TOKEN", region: "eu-west-1",
                                 service: "s3")
        let date = Date(timeIntervalSince1970: 1_440_938_160)
        let added = signer.headersToAdd(method: "GET", path: "/b/k", query: [], headers: [("host", "h")],
                                        payloadHash: SigV4Signer.emptyPayloadHash, date: date)
        let byName = Dictionary(uniqueKeysWithValues: added.map { ($0.0, $0.1) })
        XCTAssertEqual(byName["x-amz-date"], "20150830T123600Z")
        XCTAssertEqual(byName["x-amz-security-token"], "TOKEN")
        XCTAssertEqual(byName["x-amz-content-sha256"], SigV4Signer.emptyPayloadHash)
        XCTAssertTrue(byName["Authorization"]?.contains(
            "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token") == true)
        XCTAssertTrue(byName["Authorization"]?.contains("Credential=AK/20150830/eu-west-1/s3/aws4_request") == true)
    }

    func testTimestampIsUTCForEpochLeapDaysAndTheTestSuiteInstant() {
        XCTAssertEqual(SigV4Signer.timestamp(Date(timeIntervalSince1970: 0)), "19700101T000000Z")
        XCTAssertEqual(SigV4Signer.timestamp(Date(timeIntervalSince1970: 1_709_164_800)), "20240229T000000Z")
        XCTAssertEqual(SigV4Signer.timestamp(Date(timeIntervalSince1970: 1_440_938_160.9)), "20150830T123600Z")
        XCTAssertEqual(SigV4Signer.timestamp(Date(timeIntervalSince1970: 4_102_444_799)), "20991231T235959Z")
    }

    func testURIEncodingKeepsUnreservedAndOptionallySlashes() {
        XCTAssertEqual(SigV4Signer.uriEncode("a b/c~d_e.f-g", keepSlash: true), "a%20b/c~d_e.f-g")
        XCTAssertEqual(SigV4Signer.uriEncode("a/b", keepSlash: false), "a%2Fb")
        XCTAssertEqual(SigV4Signer.uriEncode("Ü+=&", keepSlash: false), "%C3%9C%2B%3D%26")
    }
}

