#include "io/input_files.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

namespace taco {
namespace {

bool tensor_file_name(const std::filesystem::path& p) {
  std::string ext = p.extension().string();
  for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".h5" || ext == ".hdf5" || ext == ".hdf" || ext == ".safetensors" ||
         ext == ".npy" || ext == ".npz";
}

}  // namespace

bool natural_less(const std::string& a, const std::string& b) {
  const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t ie = i, je = j;
      while (ie < a.size() && digit(a[ie])) ++ie;
      while (je < b.size() && digit(b[je])) ++je;
      size_t zi = i, zj = j;  // leading zeros do not count
      while (zi + 1 < ie && a[zi] == '0') ++zi;
      while (zj + 1 < je && b[zj] == '0') ++zj;
      if (ie - zi != je - zj) return ie - zi < je - zj;
      const int c = a.compare(zi, ie - zi, b, zj, je - zj);
      if (c != 0) return c < 0;
      i = ie;
      j = je;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  if (a.size() - i != b.size() - j) return a.size() - i < b.size() - j;
  return a < b;
}

std::vector<InputFile> expand_inputs(const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  std::vector<InputFile> out;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (!fs::is_directory(in, ec)) {
      out.push_back({in, in});  // the reader says what is wrong with it, if anything
      continue;
    }
    std::vector<std::string> found;
    fs::recursive_directory_iterator it(in, fs::directory_options::skip_permission_denied, ec), end;
    TACO_REQUIRE_INPUT(!ec, "{}: cannot list the directory ({})", in, ec.message());
    for (; it != end; it.increment(ec)) {
      TACO_REQUIRE_INPUT(!ec, "{}: cannot list the directory ({})", in, ec.message());
      const fs::path& p = it->path();
      if (p.filename().string().rfind('.', 0) == 0) {
        if (it->is_directory(ec)) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file(ec) && tensor_file_name(p)) found.push_back(p.string());
    }
    TACO_REQUIRE_INPUT(
        !found.empty(),
        "{}: directory holds no tensor files (*.h5, *.hdf5, *.hdf, *.safetensors, *.npy, *.npz)",
        in);
    std::sort(found.begin(), found.end(), natural_less);
    for (std::string& f : found) out.push_back({std::move(f), in});
  }
  return out;
}

}  // namespace taco
