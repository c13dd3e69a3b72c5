#pragma once
// Writes NumPy .npy files (format 1.0, little-endian, C order), atomically.
#include <cstdint>
#include <string>
#include <vector>

namespace taco {

void write_npy(const std::string& path, const std::vector<float>& values,
               const std::vector<int64_t>& shape);
void write_npy(const std::string& path, const std::vector<uint8_t>& values,
               const std::vector<int64_t>& shape);
void write_npy(const std::string& path, const std::vector<uint16_t>& values,
               const std::vector<int64_t>& shape);

}  // namespace taco
