#include "core/provenance.hpp"

#include <ctime>
#include <filesystem>

#include "core/error.hpp"
#include "core/sha256.hpp"
#include "core/version.hpp"

namespace taco {

std::string utc_now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_-./=:,+@%") == std::string::npos;
    if (plain) {
      out += a;
    } else {
      out += '\'';
      for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

Provenance make_provenance(const std::vector<std::string>& input_paths,
                           const std::vector<std::string>& argv, uint64_t seed, int threads) {
  Provenance p;
  p.taco_version = kVersion;
  p.git_commit = kGitCommit;
  p.command = shell_join(argv);
  p.date = utc_now_iso8601();
  p.seed = seed;
  p.threads = threads;
  for (const std::string& path : input_paths) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) throw_input_error("{}: cannot read ({})", path, ec.message());
    p.inputs.push_back(InputFingerprint{path, sha256_file(path), int64_t(size)});
  }
  return p;
}

nlohmann::json provenance_json(const Provenance& p) {
  nlohmann::json inputs = nlohmann::json::array();
  for (const InputFingerprint& f : p.inputs)
    inputs.push_back({{"path", f.path}, {"sha256", f.sha256}, {"bytes", f.bytes}});
  return {{"taco_version", p.taco_version},
          {"git_commit", p.git_commit},
          {"command", p.command},
          {"inputs", inputs},
          {"seed", p.seed},
          {"threads", p.threads},
          {"date", p.date}};
}

}  // namespace taco
