#pragma once
// Codecs that exploit structure instead of (only) short number formats, behind the same Codec
// interface as the quantizers, so `taco study`, `--select` and the report take them unchanged.
// docs/structured.md is the full reference; the grammar (case-insensitive, tokens after the
// family name in any order, each at most once):
//
//   subspace:k=K|frac=F[:seed=S][:coef=bf16|f32|e4m3]
//       Fixed random subspace (Protocol Models, methods.md 6): U (d x k, d = cols) = the Q of a
//       Householder QR of a d x k standard-normal matrix drawn from (seed,
//       RngStream::SubspaceBasis) row by row; shared by all ranks, never sent. c = x U (rows x k),
//       x^ = c U^T. frac=F gives k = max(1, floor(F d + 1/2)). e4m3 coefficients carry one fp32
//       scale per row.
//       Wire: header(8) | rows*k coefficients (row-major) | e4m3: rows fp32 scales.
//   lowrank:rank=R|energy=E|bpe=B[:rsvd[:power=Q][:seed=S]][:factors=bf16|f32|e4m3]
//       Truncated SVD x ~ A B^T, A = U_r diag(s_r) (rows x r), B = V_r (cols x r). Rank: R
//       (capped at min(rows, cols)); the smallest r keeping a fraction E of ||x||_F^2; or the
//       largest r whose wire fits B bytes/elem. SVD: exact (Eigen BDCSVD, double) or randomized
//       (rsvd: sketch r + 10 columns, Q power iterations, default 2, Gaussian sketch from seed).
//       Wire: header(8, u32 = r) | A column by column | B column by column
//             | e4m3: r fp32 scales of A's columns, then r of B's.
//   tt:order=D[:rank=R|eps=E][:cores=bf16|f32]
//       TT-SVD (tt.hpp) of x reshaped to order D (tt_codec_modes), ranks capped at R or chosen by
//       eps (default eps=0.1: ||x - x^||_F <= eps ||x||_F before rounding the cores).
//       Wire: header(8, u16 = D) | D u32 mode sizes | D-1 u32 ranks | cores (each r_{k-1} x n_k
//       x r_k).
//   topk:frac=F[:index=i32|bitmap]
//       The K = clamp(floor(F N + 1/2), 1, N) largest magnitudes; ties go to the lower flat index.
//       Wire (no header: K follows from F and the shape): i32: K bf16 values | K u32 indices,
//       both in ascending index order; bitmap: ceil(N/8) bytes (bit i%8 of byte i/8, LSB first)
//       | K bf16 values in ascending index order.
//   randk:frac=F[:seed=S][:unbiased]
//       K (as topk) indices drawn uniformly without replacement (Knuth's selection sampling) from
//       an RNG keyed by seed and a 64-bit hash of the input, so the set changes from step to step
//       like a shared per-step seed; unbiased multiplies the kept values by N/K (E[x^] = x).
//       Wire: u64 key | K bf16 values in ascending index order. Indices are not sent.
//   ef:<variant>     error feedback around any codec (study/error_feedback.hpp): stateless use
//                    (encode/decode here) equals the first step, with a zero residual.
//   aqsgd:<variant>  AQ-SGD delta against a per-sample cache (study/error_feedback.hpp).
//
// Non-finite inputs are encoded as 0 (the TACO policy) and counted in EncodeStats::nonfinite.
// Encoders are deterministic for a given build and input, whatever the thread count.
#include "codecs/codec.hpp"
#include "codecs/structured/wire.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace taco::structured {

// Whether a variant string names a structured codec (family prefix or preset), without validating
// it.
bool is_structured_variant(const std::string& variant);
// Builds the codec; InputError naming the bad token. nullptr when the variant is not structured.
std::unique_ptr<Codec> make_structured_codec(const std::string& variant);
// Preset names, their definitions and descriptions (stable order).
struct StructuredPreset {
  const char* name;
  const char* definition;
  const char* description;
};
const std::vector<StructuredPreset>& structured_presets();
// The name a structured codec with this canonical definition reports: the name of the preset
// defined so ("ef:int4-g32" -> "ef-int4-g32"), else the definition itself.
std::string structured_variant_name(const std::string& definition);

// ---- wire sizes (bytes), the formulas the codecs write ----
int64_t subspace_wire_bytes(int64_t rows, int64_t k, NumFormat coef);
int64_t lowrank_wire_bytes(int64_t rows, int64_t cols, int64_t rank, NumFormat factors);
int64_t tt_wire_bytes(const std::vector<int64_t>& modes, const std::vector<int64_t>& ranks,
                      NumFormat cores);
int64_t topk_count(int64_t numel, double frac);
int64_t topk_wire_bytes(int64_t numel, int64_t k, bool bitmap);
int64_t randk_wire_bytes(int64_t k);

// ---- the subspace basis and energies ----
// U (d x k, row-major float) for a seed: the basis every rank builds.
std::vector<float> subspace_basis(int64_t d, int64_t k, uint64_t seed);
// ||x U||_F^2 / ||x||_F^2 for x (rows x d) and a basis from subspace_basis (0 for x = 0).
double energy_in_span(const float* x, int64_t rows, int64_t d, const std::vector<float>& u,
                      int64_t k);
// Fraction of ||x||^2 in x's own top-k singular subspace, from descending squared singular
// values (gram_eigenvalues) and the exact total: the best any rank-k projection can keep.
double topk_energy(const std::vector<double>& sigma2_desc, int64_t k, double total);

// ---- wrappers whose state lives in the study (study/error_feedback.hpp) ----
class FeedbackCodec final : public Codec {
 public:
  // name: what name() reports (a preset name or the definition); definition: "ef:<inner name>".
  FeedbackCodec(FeedbackKind kind, std::unique_ptr<Codec> inner, std::string name,
                std::string definition);
  const std::string& name() const override { return name_; }
  nlohmann::json params() const override;
  std::vector<uint8_t> encode(const float* x, int64_t rows, int64_t cols,
                              EncodeStats* stats = nullptr) const override {
    return inner_->encode(x, rows, cols, stats);
  }
  WireSize wire_size(int64_t rows, int64_t cols) const override {
    return inner_->wire_size(rows, cols);
  }
  void decode(const uint8_t* wire, size_t nbytes, int64_t rows, int64_t cols,
              float* out) const override {
    inner_->decode(wire, nbytes, rows, cols, out);
  }
  std::optional<Wrapped> wrapped() const override { return Wrapped{kind_, inner_.get()}; }

 private:
  FeedbackKind kind_;
  std::unique_ptr<Codec> inner_;
  std::string name_, definition_;
};

}  // namespace taco::structured
