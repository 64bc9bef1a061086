#ifndef STELE_CCRYPTO_SHIM_H
#define STELE_CCRYPTO_SHIM_H

#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/err.h>
#include <openssl/crypto.h>
#include <openssl/core_names.h>
#include <openssl/params.h>

// OPENSSL_free is a macro; Swift needs a function to call.
static inline void stele_openssl_free(void *pointer) {
    OPENSSL_free(pointer);
}

// HKDF-SHA256 and HMAC-SHA256 through libcrypto's provider API. Fetching an
// algorithm by name takes locks and table lookups, which dominated sealing a
// frame when repeated per call; these helpers take an algorithm the caller
// fetched once. A keyed HMAC context is a template duplicated per message:
// duplicating only reads it, so one template may serve several threads at once.

/// The HKDF algorithm, fetched once by the caller.
static inline EVP_KDF *stele_hkdf_fetch(void) {
    return EVP_KDF_fetch(NULL, "HKDF", NULL);
}

/// HKDF-SHA256 extract-then-expand (RFC 5869) with the fetched `kdf`; 1 on success.
/// (libcrypto 3.0 cannot duplicate an HKDF context, so each call makes its own.)
static inline int stele_hkdf_sha256(EVP_KDF *kdf, const unsigned char *key, size_t key_count,
                                    const unsigned char *salt, size_t salt_count, const unsigned char *info,
                                    size_t info_count, unsigned char *output, size_t output_count) {
    EVP_KDF_CTX *context = EVP_KDF_CTX_new(kdf);
    if (context == NULL) return 0;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)key, key_count),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, salt_count),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, info_count),
        OSSL_PARAM_construct_end(),
    };
    int ok = EVP_KDF_derive(context, output, output_count, params);
    EVP_KDF_CTX_free(context);
    return ok == 1;
}

/// The HMAC algorithm, fetched once by the caller.
static inline EVP_MAC *stele_hmac_fetch(void) {
    return EVP_MAC_fetch(NULL, "HMAC", NULL);
}

/// An HMAC-SHA256 context keyed with `key`: the template for stele_hmac_keyed.
static inline EVP_MAC_CTX *stele_hmac_sha256_keyed(EVP_MAC *mac, const unsigned char *key, size_t key_count) {
    EVP_MAC_CTX *context = EVP_MAC_CTX_new(mac);
    if (context == NULL) return NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    if (EVP_MAC_init(context, key, key_count, params) != 1) {
        EVP_MAC_CTX_free(context);
        return NULL;
    }
    return context;
}

/// HMAC of `message` on a copy of the keyed `template`; writes 32 bytes; 1 on success.
static inline int stele_hmac_keyed(const EVP_MAC_CTX *template, const unsigned char *message, size_t message_count,
                                   unsigned char *output) {
    EVP_MAC_CTX *context = EVP_MAC_CTX_dup(template);
    if (context == NULL) return 0;
    size_t length = 0;
    int ok = EVP_MAC_update(context, message, message_count) == 1 && EVP_MAC_final(context, output, &length, 32) == 1 && length == 32;
    EVP_MAC_CTX_free(context);
    return ok;
}

#endif
