// What a TLS call that moved no byte means for the connection (TLSCallOutcome, pure): every SSL_get_error
// answer the server can meet, with and without errno and a queued OpenSSL error.

import COpenSSL
import Glibc
import NetLifeEvent
@testable import NetLifeServices
import Testing

@Suite struct TLSCallOutcomeTests {
    private let queued = OpenSSLError(code: 0x0A00010B, text: "error:0A00010B:SSL routines::wrong version number")

    @Test func waitsForTheSocketItNames() {
        #expect(TLSCallOutcome.result(of: "SSL_read_ex", sslError: SSL_ERROR_WANT_READ, errno: Errno(rawValue: 0), queued: nil) == .wantsRead)
        #expect(TLSCallOutcome.result(of: "SSL_write_ex", sslError: SSL_ERROR_WANT_WRITE, errno: Errno(rawValue: 0), queued: nil) == .wantsWrite)
    }

    @Test func closeNotifyAndAnEndWithoutOneAreTheEnd() {
        #expect(TLSCallOutcome.result(of: "SSL_read_ex", sslError: SSL_ERROR_ZERO_RETURN, errno: Errno(rawValue: 0), queued: nil) == .ended)
        #expect(TLSCallOutcome.result(of: "SSL_read_ex", sslError: SSL_ERROR_SYSCALL, errno: Errno(rawValue: 0), queued: nil) == .ended)
    }

    @Test func aSocketErrorCarriesErrnoAndAProtocolErrorOpenSSLsReason() {
        let reset = TLSCallOutcome.result(of: "SSL_read_ex", sslError: SSL_ERROR_SYSCALL, errno: .connectionReset, queued: nil)
        #expect(reset == .failed(SystemError("SSL_read_ex", .connectionReset)))
        let garbage = TLSCallOutcome.result(of: "SSL_read_ex", sslError: SSL_ERROR_SSL, errno: Errno(rawValue: 0), queued: queued)
        #expect(garbage == .failed(SystemError("SSL_read_ex", openSSL: queued)))
        if case .failed(let error) = garbage {
            #expect(error.description == "SSL_read_ex: error:0A00010B:SSL routines::wrong version number")
            #expect(error.errno.rawValue == EPROTO)
        }
        // A queued error wins over errno for a syscall failure: OpenSSL said more.
        #expect(TLSCallOutcome.result(of: "SSL_write_ex", sslError: SSL_ERROR_SYSCALL, errno: .connectionReset, queued: queued)
                == .failed(SystemError("SSL_write_ex", openSSL: queued)))
    }

    @Test func anythingElseIsAFailureNotATrap() {
        let other = TLSCallOutcome.result(of: "SSL_read_ex", sslError: SSL_ERROR_WANT_X509_LOOKUP, errno: Errno(rawValue: 0), queued: nil)
        guard case .failed(let error) = other else { Issue.record("\(other)"); return }
        #expect(error.description.contains("SSL_get_error"))
        #expect(TLSCallOutcome.result(of: "SSL_read_ex", sslError: SSL_ERROR_SSL, errno: Errno(rawValue: 0), queued: nil)
                == .failed(SystemError("SSL_read_ex", openSSL: OpenSSLError(code: 0, text: "TLS protocol error"))))
    }
}
