#include "secure/aead.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>

#include "core/error.h"
#include "core/log.h"
#include "core/settings.h"

#if HETCCL_HAVE_OPENSSL
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#endif

namespace hetccl::secure {
namespace {

#if HETCCL_HAVE_OPENSSL
// The libcrypto functions used, typed from OpenSSL's own headers.
struct Api {
#define HETCCL_CRYPTO_FN(name) decltype(&::name) name = nullptr;
// clang-format off
#define HETCCL_CRYPTO_FNS(X)                                                                                  \
  X(EVP_CIPHER_CTX_new) X(EVP_CIPHER_CTX_free) X(EVP_CIPHER_CTX_ctrl) X(EVP_aes_256_gcm) X(EVP_EncryptInit_ex) \
  X(EVP_EncryptUpdate) X(EVP_EncryptFinal_ex) X(EVP_DecryptInit_ex) X(EVP_DecryptUpdate) X(EVP_DecryptFinal_ex) \
  X(EVP_KDF_fetch) X(EVP_KDF_free) X(EVP_KDF_CTX_new) X(EVP_KDF_CTX_free) X(EVP_KDF_derive)                   \
  X(OSSL_PARAM_construct_utf8_string) X(OSSL_PARAM_construct_octet_string) X(OSSL_PARAM_construct_end)        \
  X(OpenSSL_version) X(OPENSSL_init_crypto)
  // clang-format on
  HETCCL_CRYPTO_FNS(HETCCL_CRYPTO_FN)
#undef HETCCL_CRYPTO_FN
};

// Never destroyed, and libcrypto's exit-time cleanup is turned off: a
// detached rendezvous thread may still seal a connection while the process
// exits.
std::once_flag gOnce;
Api& gApi = *new Api;
std::string& gError = *new std::string;  // why loading failed; empty once loaded

void load() {
  const std::string lib = settings::kCryptoLib.get();
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    gError = "cannot load OpenSSL's libcrypto '" + lib + "' (" + (e ? e : "?") +
             "); install libssl3 or set HETCCL_CRYPTO_LIB to its path";
    return;
  }
  Api a;
#define HETCCL_CRYPTO_SYM(name)                                                                   \
  a.name = reinterpret_cast<decltype(a.name)>(dlsym(h, #name));                                   \
  if (!a.name) {                                                                                  \
    gError = "'" + lib + "' lacks " #name " (HETCCL_CRYPTO_LIB must name OpenSSL 3's libcrypto)"; \
    return;                                                                                       \
  }
  HETCCL_CRYPTO_FNS(HETCCL_CRYPTO_SYM)
#undef HETCCL_CRYPTO_SYM
  if (a.OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr) != 1) {
    gError = "'" + lib + "': OPENSSL_init_crypto failed";
    return;
  }
  gApi = a;
  LOG_INFO(kTransport, "encryption: %s from %s", gApi.OpenSSL_version(OPENSSL_VERSION), lib.c_str());
}

const Api& api() {
  std::call_once(gOnce, load);
  if (!gError.empty()) throwError(hetcclSystemError, gError);
  return gApi;
}

EVP_CIPHER_CTX* cctx(void* p) { return static_cast<EVP_CIPHER_CTX*>(p); }

[[noreturn]] void failed(const char* what) {
  throwError(hetcclInternalError, std::string("libcrypto: ") + what + " failed");
}
#endif

}  // namespace

void requireCrypto() {
#if HETCCL_HAVE_OPENSSL
  api();
#else
  throwError(hetcclInvalidUsage, "this hetccl was built without OpenSSL's headers (libssl-dev): no encryption");
#endif
}

std::string cryptoDescription() {
#if HETCCL_HAVE_OPENSSL
  try {
    return api().OpenSSL_version(OPENSSL_VERSION);
  } catch (const Error& e) {
    return e.what();
  }
#else
  return "not built (no OpenSSL headers)";
#endif
}

#if HETCCL_HAVE_OPENSSL
void hkdfSha256(std::span<const uint8_t> ikm, std::span<const uint8_t> salt, std::string_view info,
                std::span<uint8_t> out) {
  const Api& a = api();
  EVP_KDF* kdf = a.EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  if (!kdf) failed("HKDF fetch");
  EVP_KDF_CTX* k = a.EVP_KDF_CTX_new(kdf);
  a.EVP_KDF_free(kdf);
  if (!k) failed("HKDF context");
  char digest[] = "SHA256";
  OSSL_PARAM params[5];
  int n = 0;
  params[n++] = a.OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0);
  params[n++] = a.OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(ikm.data()), ikm.size());
  if (!salt.empty())
    params[n++] =
        a.OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<uint8_t*>(salt.data()), salt.size());
  params[n++] = a.OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<char*>(info.data()), info.size());
  params[n] = a.OSSL_PARAM_construct_end();
  int ok = a.EVP_KDF_derive(k, out.data(), out.size(), params);
  a.EVP_KDF_CTX_free(k);
  if (ok != 1) failed("HKDF derive");
}

Aes256Gcm::Aes256Gcm(std::span<const uint8_t, kKeyBytes> key, bool encrypt) : encrypt_(encrypt) {
  ctx_ = api().EVP_CIPHER_CTX_new();
  if (!ctx_) failed("cipher context");
  setKey(key);
}

Aes256Gcm::~Aes256Gcm() {
  if (ctx_) gApi.EVP_CIPHER_CTX_free(cctx(ctx_));
}

void Aes256Gcm::setKey(std::span<const uint8_t, kKeyBytes> key) {
  const Api& a = gApi;
  int ok = encrypt_ ? a.EVP_EncryptInit_ex(cctx(ctx_), a.EVP_aes_256_gcm(), nullptr, key.data(), nullptr)
                    : a.EVP_DecryptInit_ex(cctx(ctx_), a.EVP_aes_256_gcm(), nullptr, key.data(), nullptr);
  if (ok != 1) failed("AES-256-GCM key");
}

void Aes256Gcm::seal(const uint8_t iv[kIvBytes], std::span<const uint8_t> aad, std::span<const Piece> in, uint8_t* out,
                     uint8_t tag[kTagBytes]) {
  const Api& a = gApi;
  EVP_CIPHER_CTX* c = cctx(ctx_);
  int len = 0;
  if (a.EVP_EncryptInit_ex(c, nullptr, nullptr, nullptr, iv) != 1) failed("GCM iv");
  if (!aad.empty() && a.EVP_EncryptUpdate(c, nullptr, &len, aad.data(), static_cast<int>(aad.size())) != 1)
    failed("GCM aad");
  for (const Piece& p : in) {
    if (p.len == 0) continue;
    if (a.EVP_EncryptUpdate(c, out, &len, p.data, static_cast<int>(p.len)) != 1) failed("GCM encrypt");
    out += len;
  }
  if (a.EVP_EncryptFinal_ex(c, out, &len) != 1) failed("GCM final");
  if (a.EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes), tag) != 1) failed("GCM tag");
}

bool Aes256Gcm::open(const uint8_t iv[kIvBytes], std::span<const uint8_t> aad, const uint8_t* in, size_t n,
                     uint8_t* out, const uint8_t tag[kTagBytes]) {
  const Api& a = gApi;
  EVP_CIPHER_CTX* c = cctx(ctx_);
  int len = 0;
  if (a.EVP_DecryptInit_ex(c, nullptr, nullptr, nullptr, iv) != 1) failed("GCM iv");
  if (!aad.empty() && a.EVP_DecryptUpdate(c, nullptr, &len, aad.data(), static_cast<int>(aad.size())) != 1)
    failed("GCM aad");
  if (n > 0 && a.EVP_DecryptUpdate(c, out, &len, in, static_cast<int>(n)) != 1) failed("GCM decrypt");
  if (a.EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes), const_cast<uint8_t*>(tag)) != 1)
    failed("GCM tag");
  return a.EVP_DecryptFinal_ex(c, out + len, &len) == 1;
}
#else
void hkdfSha256(std::span<const uint8_t>, std::span<const uint8_t>, std::string_view, std::span<uint8_t>) {
  requireCrypto();
}
Aes256Gcm::Aes256Gcm(std::span<const uint8_t, kKeyBytes>, bool encrypt) : encrypt_(encrypt) { requireCrypto(); }
Aes256Gcm::~Aes256Gcm() = default;
void Aes256Gcm::setKey(std::span<const uint8_t, kKeyBytes>) { requireCrypto(); }
void Aes256Gcm::seal(const uint8_t*, std::span<const uint8_t>, std::span<const Piece>, uint8_t*, uint8_t*) {
  requireCrypto();
}
bool Aes256Gcm::open(const uint8_t*, std::span<const uint8_t>, const uint8_t*, size_t, uint8_t*, const uint8_t*) {
  requireCrypto();
}
#endif

}  // namespace hetccl::secure
