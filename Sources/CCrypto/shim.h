#ifndef STELE_CCRYPTO_SHIM_H
#define STELE_CCRYPTO_SHIM_H

#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/err.h>
#include <openssl/crypto.h>

// OPENSSL_free is a macro; Swift needs a function to call.
static inline void stele_openssl_free(void *pointer) {
    OPENSSL_free(pointer);
}

#endif
