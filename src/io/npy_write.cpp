#include "io/npy_write.hpp"

#include "core/atomic_file.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

namespace taco {
namespace {

template <typename T>
void write_npy_typed(const std::string& path, const char* descr, const std::vector<T>& values,
                     const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  TACO_ASSERT(n == int64_t(values.size()), "npy shape has {} elements, data {}", n, values.size());
  std::string dims;
  for (int64_t d : shape) dims += fmt::format("{}, ", d);
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  // Magic (6) + version (2) + header length (2) + header, padded with spaces to 64 bytes, ending in
  // '\n'.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  AtomicFile f(path, true);
  auto& os = f.stream();
  os.write("\x93NUMPY\x01\x00", 8);
  const uint16_t hlen = uint16_t(header.size());
  const char len_bytes[2] = {char(hlen & 0xff), char(hlen >> 8)};
  os.write(len_bytes, 2);
  os.write(header.data(), std::streamsize(header.size()));
  os.write(reinterpret_cast<const char*>(values.data()),
           std::streamsize(values.size() * sizeof(T)));
  f.commit();
}

}  // namespace

void write_npy(const std::string& path, const std::vector<float>& v,
               const std::vector<int64_t>& s) {
  write_npy_typed(path, "<f4", v, s);
}
void write_npy(const std::string& path, const std::vector<uint8_t>& v,
               const std::vector<int64_t>& s) {
  write_npy_typed(path, "|u1", v, s);
}
void write_npy(const std::string& path, const std::vector<uint16_t>& v,
               const std::vector<int64_t>& s) {
  write_npy_typed(path, "<u2", v, s);
}

}  // namespace taco
