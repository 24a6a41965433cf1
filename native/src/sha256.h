// SHA-256 (FIPS 180-4), for checking that named data hashes to the key it is stored under.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace etserve {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  std::array<uint8_t, 32> finish();

  // The lowercase hex digest of `size` bytes at `data`.
  static std::string hex(const void* data, size_t size);

 private:
  void block(const uint8_t* chunk);

  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // bytes so far
};

}  // namespace etserve
