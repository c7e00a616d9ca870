// OpenSSL 3 libcrypto from Debian's libssl-dev: SHA-256 (EVP) and HMAC for SigV4.
#ifndef BACKUP_CCRYPTO_SHIM_H
#define BACKUP_CCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <openssl/rand.h>

static inline const EVP_MD *backup_evp_sha256(void) { return EVP_sha256(); }
#endif
