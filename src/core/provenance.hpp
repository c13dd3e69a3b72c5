#pragma once
// What every output file records about the run that wrote it: the build, the command line, the
// date, and a fingerprint of each input (results.json, bench and comm records).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace taco {

struct InputFingerprint {
  std::string path, sha256;
  int64_t bytes = 0;
};

struct Provenance {
  std::string taco_version, git_commit, command, date;
  std::vector<InputFingerprint> inputs;
  uint64_t seed = 0;
  int threads = 1;
};

// Hashes the inputs (sha256) and records the build, the command line (shell-quoted), seed,
// threads and the UTC date (ISO 8601). InputError naming a file that cannot be read.
Provenance make_provenance(const std::vector<std::string>& input_paths,
                           const std::vector<std::string>& argv, uint64_t seed, int threads);
// argv as one shell line: arguments with characters a shell treats specially are single-quoted.
std::string shell_join(const std::vector<std::string>& argv);
// The current time in UTC, ISO 8601 to the second ("2026-11-30T21:46:50Z").
std::string utc_now_iso8601();
nlohmann::json provenance_json(const Provenance& p);

}  // namespace taco
