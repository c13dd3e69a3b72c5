#pragma once
// The files `taco study` writes (docs/results-schema.md) and its printed summary.
#include "study/study.hpp"

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace taco::study {

struct InputFile {
  std::string path, sha256;
  int64_t bytes = 0;
};

struct Provenance {
  std::string taco_version, git_commit, command, date;
  std::vector<InputFile> inputs;
  uint64_t seed = 0;
  int threads = 1;
};

// Hashes the inputs (sha256) and records the build, the command line (shell-quoted), seed,
// threads and the UTC date (ISO 8601).
Provenance make_provenance(const std::vector<std::string>& input_paths,
                           const std::vector<std::string>& argv, uint64_t seed, int threads);
std::string shell_join(const std::vector<std::string>& argv);
// The current time in UTC, ISO 8601 to the second ("2026-11-30T21:46:50Z").
std::string utc_now_iso8601();
nlohmann::json provenance_json(const Provenance& p);

// File contents, byte-for-byte deterministic given the result (no timestamps).
std::string results_csv(const StudyResult& r);
std::string collectives_csv(const StudyResult& r);
std::string histograms_csv(const StudyResult& r);
nlohmann::json results_json(const StudyResult& r, const Provenance& p);

// The files below, by name, with their contents (results.json last).
std::vector<std::pair<std::string, std::string>> study_files(const StudyResult& r, const Provenance& p);

// Writes DIR/results.csv, results.json, histograms.csv (when the study made histograms) and
// collectives.csv (when it simulated collectives); a histograms.csv or collectives.csv left by
// an earlier run that this one does not replace is removed. Every file is written whole or not
// at all, results.json last.
void write_study_outputs(const StudyResult& r, const Provenance& p, const std::string& dir);

// The ranked table printed at the end of a study: per (site, direction), variants by median
// rel_l2, with bytes/elem, p99 and the Hadamard effect (transform variants vs their twins).
std::string format_summary(const StudyResult& r);

}  // namespace taco::study
