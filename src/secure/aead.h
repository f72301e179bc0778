// AES-256-GCM and HKDF-SHA256 from OpenSSL 3's libcrypto, loaded at run time
// (HETCCL_CRYPTO_LIB) the first time a communicator needs them, so that a
// job that never encrypts neither links nor loads it. No cipher is written
// here: every block of crypto is libcrypto's (AES-NI where the CPU has it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace hetccl::secure {

constexpr size_t kKeyBytes = 32;
constexpr size_t kIvBytes = 12;
constexpr size_t kTagBytes = 16;

// Loads libcrypto (once); throws hetcclSystemError naming the library and
// HETCCL_CRYPTO_LIB when it cannot be loaded or lacks a function, and
// hetcclInvalidUsage when this build has no OpenSSL headers.
void requireCrypto();
// "OpenSSL 3.0.19 ..." once loaded; why not otherwise (never throws).
std::string cryptoDescription();

// RFC 5869 with SHA-256: out.size() bytes from the input key material.
void hkdfSha256(std::span<const uint8_t> ikm, std::span<const uint8_t> salt, std::string_view info,
                std::span<uint8_t> out);

// One direction's cipher context with its key set once; each seal/open sets
// only the 96-bit IV. Not thread-safe: one per thread of use.
class Aes256Gcm {
 public:
  Aes256Gcm(std::span<const uint8_t, kKeyBytes> key, bool encrypt);
  ~Aes256Gcm();
  Aes256Gcm(const Aes256Gcm&) = delete;
  Aes256Gcm& operator=(const Aes256Gcm&) = delete;
  void setKey(std::span<const uint8_t, kKeyBytes> key);

  // Encrypts pieces (in order, as one plaintext) into out, which has their
  // total size; writes the tag. aad is authenticated, not encrypted.
  struct Piece {
    const uint8_t* data;
    size_t len;
  };
  void seal(const uint8_t iv[kIvBytes], std::span<const uint8_t> aad, std::span<const Piece> in, uint8_t* out,
            uint8_t tag[kTagBytes]);
  // Decrypts n bytes (out may equal in); false when the tag does not
  // verify (out then holds garbage the caller must not use).
  bool open(const uint8_t iv[kIvBytes], std::span<const uint8_t> aad, const uint8_t* in, size_t n, uint8_t* out,
            const uint8_t tag[kTagBytes]);

 private:
  void* ctx_ = nullptr;  // EVP_CIPHER_CTX
  bool encrypt_;
};

}  // namespace hetccl::secure
