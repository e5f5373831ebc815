// OpenSSL's libcrypto: message digests through the EVP interface (SHA-256 and MD5 of downloads). Debian:
// libssl-dev.
#include <openssl/evp.h>
