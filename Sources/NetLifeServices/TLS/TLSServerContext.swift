// A TLS server's certificate and settings: an SSL_CTX made from a certificate chain file and a private key
// file (PEM), for TLS 1.2 and 1.3 with ALPN http/1.1 (the settings are in COpenSSL's shim). A listener holds
// its certificate in a `TLSCertificate`, which reads the files again on reload; each connection's SSL holds
// a reference of its own to the context it was made with, so a reload changes only new connections.

@preconcurrency import Glibc
import COpenSSL
import NetLife
import NetLifeEvent

/// An SSL_CTX for the server side, with one certificate chain and its key.
final class TLSServerContext {
    let pointer: OpaquePointer
    /// The SHA-256 of the certificate chain and key files as read: a reload tells a renewed pair by it.
    let filesDigest: [UInt8]

    /// The largest certificate chain or key file read (a chain of a few certificates is a few KiB).
    static let maxFileBytes = 1 << 20

    /// Reads the certificate chain and the key, and checks that they belong together. The error names the
    /// key at fault (`tls-certificate` or `tls-key`) and the file. Each file is read as netlifed reads every
    /// file a config names: opened without blocking (a FIFO is refused, not waited on), a regular file of at
    /// most `maxFileBytes`; OpenSSL gets the bytes and never prompts for a pass phrase (an encrypted key is
    /// refused, saying so). The corresponding C functions are `SSL_CTX_new`, `SSL_CTX_use_certificate`,
    /// `SSL_CTX_add0_chain_cert`, `PEM_read_bio_PrivateKey`, `SSL_CTX_use_PrivateKey` and
    /// `SSL_CTX_check_private_key`.
    init(certificatePath: String, keyPath: String) throws(ServiceOptionError) {
        var contents: [String: [UInt8]] = [:]
        var unread: [ServiceOptionError] = []
        for (key, path) in [("tls-certificate", certificatePath), ("tls-key", keyPath)] {
            guard path.hasPrefix("/") else {
                unread.append(ServiceOptionError(key: key, "\(key) must be an absolute path, got '\(path)'"))
                continue
            }
            switch RegularFile.read(path, limit: Self.maxFileBytes) {
            case .success(let bytes): contents[key] = bytes
            case .failure(let failure):
                unread.append(ServiceOptionError(key: key, "\(key) \(path) cannot be read: \(failure)", isAboutThisHost: true))
            }
        }
        // Each file that cannot be read is its own error: both are reported.
        try ServiceOptionError.throwAll(unread)
        let certificate = contents["tls-certificate"] ?? []
        let key = contents["tls-key"] ?? []
        var digest = SHA256Digest()
        digest.update(certificate)
        digest.update(key)
        filesDigest = digest.finish()
        if key.withUnsafeBytes({ netlife_pem_is_encrypted_key($0.baseAddress, $0.count) }) == 1 {
            throw ServiceOptionError(key: "tls-key", "tls-key \(keyPath) is an encrypted key, which netlifed does not read (it would have to ask for the pass phrase): store it decrypted, readable by root alone (openssl pkey -in KEY -out KEY.plain; chmod 0600)")
        }
        let context: OpaquePointer
        do {
            context = try OpenSSLCalls.make("SSL_CTX_new") { SSL_CTX_new(TLS_server_method()) }
        } catch {
            throw ServiceOptionError("cannot make a TLS context: \(error)")
        }
        do throws(ServiceOptionError) {
            do {
                try OpenSSLCalls.check("SSL_CTX_set_min_proto_version") { netlife_ssl_ctx_configure_server(context) }
            } catch {
                throw ServiceOptionError("cannot set up TLS: \(error)")
            }
            netlife_ssl_ctx_select_http11(context)
            do {
                try OpenSSLCalls.check("SSL_CTX_use_certificate") {
                    certificate.withUnsafeBytes { netlife_ssl_ctx_use_chain_pem(context, $0.baseAddress, Int32($0.count)) }
                }
            } catch {
                throw ServiceOptionError(key: "tls-certificate", "tls-certificate \(certificatePath) is not a PEM certificate chain OpenSSL accepts (\(error))")
            }
            do {
                try OpenSSLCalls.check("PEM_read_bio_PrivateKey") {
                    key.withUnsafeBytes { netlife_ssl_ctx_use_key_pem(context, $0.baseAddress, Int32($0.count)) }
                }
                try OpenSSLCalls.check("SSL_CTX_check_private_key") { SSL_CTX_check_private_key(context) }
            } catch {
                throw ServiceOptionError(key: "tls-key", "tls-key \(keyPath) is not the PEM private key of \(certificatePath) (\(error))")
            }
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        pointer = context
    }

    // Held by the listener's TLSCertificate and by no one else in Swift (each SSL counts its own reference
    // in C), the context has no owner to free it explicitly: it goes when the last Swift reference does.
    deinit {
        SSL_CTX_free(pointer)
    }
}

/// A listener's certificate: the files it was configured with and the context last made from them.
public final class TLSCertificate {
    /// The `tls-certificate` and `tls-key` paths.
    public let certificatePath: String
    public let keyPath: String
    /// What new connections are made with.
    private(set) var context: TLSServerContext

    /// Reads both files (the config check and each listener's service do).
    init(certificatePath: String, keyPath: String) throws(ServiceOptionError) {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
        context = try TLSServerContext(certificatePath: certificatePath, keyPath: keyPath)
    }

    /// Both keys or neither: nil without TLS.
    static func parse(_ options: ServiceOptions) throws(ServiceOptionError) -> TLSCertificate? {
        switch (options["tls-certificate"], options["tls-key"]) {
        case (nil, nil):
            return nil
        case (let certificate?, let key?):
            return try TLSCertificate(certificatePath: certificate, keyPath: key)
        case (_?, nil):
            throw ServiceOptionError(key: "tls-certificate", "tls-certificate needs tls-key = FILE (the certificate's private key)")
        case (nil, _?):
            throw ServiceOptionError(key: "tls-key", "tls-key needs tls-certificate = FILE (the certificate chain)")
        }
    }

    /// What a reload did to a listener's certificate.
    enum ReloadResult {
        case unchanged, renewed
        case failed(ServiceOptionError)
    }

    /// Reads the files again; on failure the context in use stays and the error is returned.
    func reload() -> ReloadResult {
        do {
            let fresh = try TLSServerContext(certificatePath: certificatePath, keyPath: keyPath)
            let renewed = fresh.filesDigest != context.filesDigest
            context = fresh
            return renewed ? .renewed : .unchanged
        } catch {
            return .failed(error)
        }
    }

    private struct WeakCertificate {
        weak var certificate: TLSCertificate?
    }

    /// The certificates of the listeners attached to apps, for `reloadAll()`. Loop thread only.
    nonisolated(unsafe) private static var attached: [WeakCertificate] = []

    /// Remembers `certificate` for `reloadAll()` (a listener's service attached to its app).
    static func attach(_ certificate: TLSCertificate) {
        attached = attached.filter { $0.certificate != nil } + [WeakCertificate(certificate: certificate)]
    }

    /// Reads every attached listener's certificate and key again (`netlifectl reload`, SIGHUP), so that a
    /// renewed certificate is served to new connections without a restart. Returns the certificates that
    /// changed and the failures, each naming its files; those listeners keep the certificate they had.
    public static func reloadAll() -> (renewed: [String], failures: [String]) {
        attached = attached.filter { $0.certificate != nil }
        var renewed: [String] = []
        var failures: [String] = []
        for entry in attached {
            guard let certificate = entry.certificate else { continue }
            switch certificate.reload() {
            case .unchanged: break
            case .renewed: renewed.append(certificate.certificatePath)
            case .failed(let error): failures.append("\(certificate.certificatePath): \(error.message)")
            }
        }
        return (renewed, failures)
    }
}
