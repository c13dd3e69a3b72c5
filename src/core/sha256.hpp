#pragma once
// SHA-256 (FIPS 180-4), for the input fingerprints in results.json provenance.
#include <cstddef>
#include <cstdint>
#include <string>

namespace taco {

class Sha256 {
 public:
  // use_cpu_extensions = false forces the portable code (for testing both paths).
  explicit Sha256(bool use_cpu_extensions = true);
  void update(const void* data, size_t n);
  std::string hex_digest();  // finishes the hash; call once

 private:
  void block(const uint8_t* p);             // portable
  void blocks(const uint8_t* p, size_t n);  // SHA-NI when the CPU has it
  bool sha_ni_ = false;
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string sha256_hex(const void* data, size_t n);
// Streams a file; InputError naming the file if it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace taco
