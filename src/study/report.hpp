#pragma once
// The files `taco study` writes (docs/results-schema.md) and its printed summary.
#include "core/provenance.hpp"
#include "study/study.hpp"

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace taco::study {

// File contents, byte-for-byte deterministic given the result (no timestamps).
std::string results_csv(const StudyResult& r);
std::string collectives_csv(const StudyResult& r);
std::string histograms_csv(const StudyResult& r);
nlohmann::json results_json(const StudyResult& r, const Provenance& p);

// The files below, by name, with their contents (results.json last).
std::vector<std::pair<std::string, std::string>> study_files(const StudyResult& r,
                                                             const Provenance& p);

// Writes DIR/results.csv, results.json, histograms.csv (when the study made histograms) and
// collectives.csv (when it simulated collectives); a histograms.csv or collectives.csv left by
// an earlier run that this one does not replace is removed. Every file is written whole or not
// at all, results.json last.
void write_study_outputs(const StudyResult& r, const Provenance& p, const std::string& dir);

// The ranked table printed at the end of a study: per (site, direction), variants by median
// rel_l2, with bytes/elem, p99 and the Hadamard effect (transform variants vs their twins).
std::string format_summary(const StudyResult& r);

}  // namespace taco::study
