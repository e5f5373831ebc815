#if canImport(Testing)   // built only for the tests: see Package.swift
// Certificates for the TLS peers (nginx with `ssl`, pyftpdlib's TLS handler), made with the `openssl` command
// in a directory the caller owns: a test CA, a server certificate it signs (EC P-256, subjectAltName
// IP:127.0.0.1 and DNS:localhost plus whatever the caller adds), and a second CA that signed nothing, for a
// client told to trust the wrong CA. A peer that picks its address later (nginx on a random 127.a.b.c)
// asks for a certificate of its own with `issue`, signed by the same CA; `renew` replaces the server's (a
// reload test), and the fingerprints say which certificate a file holds and which one a server presents.

import Foundation

/// A test CA and the server certificates it signs; the files stay until the caller removes `directory`.
public final class PeerCertificates {
    /// Where the files are.
    public let directory: String
    /// The CA that signs the server certificates: what a client passes as `--cacert`.
    public let caPath: String
    /// The server certificate (PEM), valid for 127.0.0.1, localhost and the names given to `init`.
    public let certificatePath: String
    /// The server certificate's private key (PEM, unencrypted).
    public let keyPath: String
    /// Another CA, which signed none of these certificates: trusting it alone, a client must refuse the server.
    public let otherCAPath: String
    private let caKeyPath: String

    /// Makes the CAs and a server certificate for 127.0.0.1, localhost, `ipAddresses` and `dnsNames`.
    public init(directory: String, ipAddresses: [String] = [], dnsNames: [String] = []) throws {
        self.directory = directory
        caPath = directory + "/ca.pem"
        caKeyPath = directory + "/ca.key"
        otherCAPath = directory + "/other-ca.pem"
        certificatePath = directory + "/server.pem"
        keyPath = directory + "/server.key"
        // The command's own configuration, so that nothing of the machine's openssl.cnf (its default
        // extensions, its distinguished name prompts) ends up in the certificates.
        _ = FileManager.default.createFile(atPath: directory + "/openssl.cnf", contents: Data("""
            [req]
            distinguished_name = dn
            prompt = no
            [dn]
            CN = netlife test
            [ca]
            basicConstraints = critical, CA:TRUE
            keyUsage = critical, keyCertSign, cRLSign
            subjectKeyIdentifier = hash

            """.utf8))
        try makeCA(certificate: caPath, key: caKeyPath, name: "netlife test CA")
        try makeCA(certificate: otherCAPath, key: directory + "/other-ca.key", name: "netlife untrusted test CA")
        try issue(certificate: certificatePath, key: keyPath, ipAddresses: ipAddresses, dnsNames: dnsNames)
    }

    /// Issues another server certificate signed by the CA, for 127.0.0.1, localhost, `ipAddresses` and
    /// `dnsNames`, written to `certificate` and `key`.
    public func issue(certificate: String, key: String, ipAddresses: [String], dnsNames: [String] = []) throws {
        let names = (["IP:127.0.0.1", "DNS:localhost"] + ipAddresses.map { "IP:" + $0 } + dnsNames.map { "DNS:" + $0 })
        let extensions = certificate + ".ext"
        _ = FileManager.default.createFile(atPath: extensions, contents: Data("""
            [leaf]
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature
            extendedKeyUsage = serverAuth
            subjectKeyIdentifier = hash
            authorityKeyIdentifier = keyid
            subjectAltName = \(names.joined(separator: ", "))

            """.utf8))
        let request = certificate + ".csr"
        try openssl(["req", "-config", directory + "/openssl.cnf", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                     "-nodes", "-keyout", key, "-out", request, "-subj", "/CN=localhost"])
        try openssl(["x509", "-req", "-in", request, "-CA", caPath, "-CAkey", caKeyPath, "-CAcreateserial", "-days", "7",
                     "-extfile", extensions, "-extensions", "leaf", "-out", certificate])
    }

    /// Signs a new server key and certificate (a new serial, so a new fingerprint) in place of the old: a
    /// renewed certificate for a reload test.
    public func renew(ipAddresses: [String] = [], dnsNames: [String] = []) throws {
        try issue(certificate: certificatePath, key: keyPath, ipAddresses: ipAddresses, dnsNames: dnsNames)
    }

    /// The SHA-256 fingerprint of the server certificate file, as `openssl x509 -fingerprint` prints it.
    public var fingerprint: String { Self.fingerprint(ofFile: certificatePath) }

    /// The SHA-256 fingerprint of the certificate a TLS server on 127.0.0.1:`port` presents (openssl
    /// s_client), or "" when none was read.
    public static func servedFingerprint(port: UInt16) -> String {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        _ = run(["/bin/sh", "-c", "/usr/bin/openssl s_client -connect 127.0.0.1:\(port) -servername localhost </dev/null >\(scratch.file("served"))"],
                timeout: 10)
        return fingerprint(ofFile: scratch.file("served"))
    }

    /// The fingerprint of the first PEM certificate in the file at `path` ("" when there is none).
    public static func fingerprint(ofFile path: String) -> String {
        run(["/usr/bin/openssl", "x509", "-in", path, "-noout", "-fingerprint", "-sha256"], timeout: 10)
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func makeCA(certificate: String, key: String, name: String) throws {
        try openssl(["req", "-config", directory + "/openssl.cnf", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                     "-nodes", "-keyout", key, "-out", certificate, "-days", "7", "-subj", "/CN=" + name, "-extensions", "ca"])
    }

    private func openssl(_ arguments: [String]) throws {
        let result = run(["/usr/bin/openssl"] + arguments)
        if result.status != 0 { throw TestFailure("openssl \(arguments.first ?? "") failed: \(result)") }
    }
}
#endif
