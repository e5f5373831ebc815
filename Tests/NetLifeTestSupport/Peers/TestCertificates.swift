#if canImport(Testing)   // built only for the tests: see Package.swift
// Certificates for TLS tests, made with the `openssl` command: a CA of their own and a server certificate
// it signs for IP:127.0.0.1 and DNS:localhost, so that curl and wget verify the server with `--cacert`
// alone. `renew()` signs a new server certificate and key in place (a reload test's renewed certificate).

import Foundation

/// A CA and a server certificate signed by it, in `directory` (PEM files).
public struct TestCertificates {
    /// Where the files are.
    public let directory: String
    /// The CA's certificate: what a client trusts (`curl --cacert`).
    public var caPath: String { directory + "/ca.pem" }
    private var caKeyPath: String { directory + "/ca.key" }
    /// The server's certificate (a chain of one) and its key.
    public var certificatePath: String { directory + "/server.pem" }
    public var keyPath: String { directory + "/server.key" }

    /// Makes the CA and a server certificate in `directory` (an existing directory). Throws with openssl's
    /// output when a step fails.
    public init(directory: String) throws {
        self.directory = directory
        try Self.openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                          "-keyout", caKeyPath, "-out", caPath, "-days", "2", "-subj", "/CN=netlife test CA",
                          "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"])
        try renew()
    }

    /// Signs a new server key and certificate (a new serial, so a new fingerprint) in place of the old.
    public func renew() throws {
        let extensions = directory + "/server.ext"
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
            .write(toFile: extensions, atomically: true, encoding: .utf8)
        let request = directory + "/server.csr"
        try Self.openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", keyPath,
                          "-out", request, "-subj", "/CN=localhost"])
        try Self.openssl(["x509", "-req", "-in", request, "-CA", caPath, "-CAkey", caKeyPath, "-set_serial",
                          String(UInt32.random(in: 1...UInt32.max)), "-out", certificatePath, "-days", "2", "-extfile", extensions])
    }

    /// The SHA-256 fingerprint of the server certificate file, as `openssl x509 -fingerprint` prints it.
    public var fingerprint: String { Self.fingerprint(ofPEM: (try? String(contentsOfFile: certificatePath, encoding: .utf8)) ?? "") }

    /// The SHA-256 fingerprint of the certificate a TLS server on 127.0.0.1:`port` presents (openssl
    /// s_client), or "" when none was read.
    public static func servedFingerprint(port: UInt16) -> String {
        let shown = runWithInput(["/usr/bin/openssl", "s_client", "-connect", "127.0.0.1:\(port)", "-servername", "localhost"],
                        stdinText: "", timeout: 10)
        return fingerprint(ofPEM: shown.stdout)
    }

    /// The fingerprint of the first PEM certificate in `text`.
    public static func fingerprint(ofPEM text: String) -> String {
        guard let begin = text.range(of: "-----BEGIN CERTIFICATE-----"),
              let end = text.range(of: "-----END CERTIFICATE-----", range: begin.upperBound..<text.endIndex) else { return "" }
        let pem = String(text[begin.lowerBound..<end.upperBound]) + "\n"
        let printed = runWithInput(["/usr/bin/openssl", "x509", "-noout", "-fingerprint", "-sha256"], stdinText: pem, timeout: 10)
        return printed.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private static func openssl(_ arguments: [String]) throws {
        let result = run(["/usr/bin/openssl"] + arguments, timeout: 30)
        guard result.status == 0 else { throw TestFailure("openssl \(arguments.joined(separator: " ")): \(result)") }
    }
}

/// Runs `arguments` with `stdinText` as its standard input (then closed), killed after `timeout`.
private func runWithInput(_ arguments: [String], stdinText: String, timeout: TimeInterval) -> ProcessResult {
    let scratch = TemporaryDirectory()
    defer { scratch.remove() }
    scratch.write("in", stdinText)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: arguments[0])
    process.arguments = Array(arguments.dropFirst())
    _ = FileManager.default.createFile(atPath: scratch.file("out"), contents: nil)
    _ = FileManager.default.createFile(atPath: scratch.file("err"), contents: nil)
    process.standardInput = FileHandle(forReadingAtPath: scratch.file("in"))
    process.standardOutput = FileHandle(forWritingAtPath: scratch.file("out"))
    process.standardError = FileHandle(forWritingAtPath: scratch.file("err"))
    do { try process.run() } catch { return ProcessResult(status: -1, stdout: "", stderr: "\(error)") }
    if !waitUntil(timeout: timeout, { !process.isRunning }) { kill(process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
    return ProcessResult(status: process.terminationStatus, stdout: scratch.read("out"), stderr: scratch.read("err"))
}
#endif
