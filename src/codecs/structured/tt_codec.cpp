// tt:order=D: the TT-SVD cores of the reshaped tensor on the wire (structured.hpp, tt.hpp).
#include "codecs/structured/specs.hpp"
#include "codecs/structured/structured.hpp"
#include "codecs/structured/tt.hpp"

#include <algorithm>

namespace taco::structured {

int64_t tt_wire_bytes(const std::vector<int64_t>& modes, const std::vector<int64_t>& ranks,
                      NumFormat cores) {
  TACO_ASSERT(ranks.size() == modes.size() + 1, "tt_wire_bytes: {} ranks for {} modes",
              ranks.size(), modes.size());
  int64_t params = 0;
  for (size_t k = 0; k < modes.size(); ++k) params += ranks[k] * modes[k] * ranks[k + 1];
  const int64_t d = int64_t(modes.size());
  return int64_t(kHeaderBytes) + 4 * d + 4 * (d - 1) + params * num_format_bytes(cores);
}

namespace {

class TtCodec final : public Codec {
 public:
  TtCodec(const TtSpec& s, std::string name, std::string definition)
      : s_(s), name_(std::move(name)), definition_(std::move(definition)) {}

  const std::string& name() const override { return name_; }

  nlohmann::json params() const override {
    nlohmann::json p = {{"variant", name_},
                        {"definition", definition_},
                        {"family", "tt"},
                        {"elem_format", std::string(num_format_name(s_.cores))},
                        {"scale_format", "none"},
                        {"granularity", "none"},
                        {"group_size", nullptr},
                        {"transform", "tt"},
                        {"order", s_.order},
                        {"cores", std::string(num_format_name(s_.cores))},
                        {"modes", "tt_codec_modes: balanced factors of rows, then of cols"}};
    if (s_.rank > 0)
      p["rank"] = s_.rank;
    else
      p["eps"] = s_.eps;
    return p;
  }

  std::vector<uint8_t> encode(const float* x, int64_t rows, int64_t cols,
                              EncodeStats* stats) const override {
    const int64_t n = checked_numel(name_, rows, cols);
    std::vector<float> xs;
    const int64_t bad = sanitize(x, n, xs);
    if (stats) stats->nonfinite += bad;
    const std::vector<int64_t> modes = tt_codec_modes(rows, cols, s_.order);
    TtOptions opt;
    if (s_.rank > 0)
      opt.max_rank = s_.rank;
    else
      opt.eps = s_.eps;
    const TensorTrain tt = tt_svd(xs.data(), modes, opt);
    ByteWriter w(size_t(tt_wire_bytes(tt.modes, tt.ranks, s_.cores)));
    write_header(w, {kMagicTT, s_.cores, uint16_t(s_.order), 0});
    for (int64_t m : tt.modes) w.u32(uint32_t(m));
    for (size_t k = 1; k < tt.modes.size(); ++k) w.u32(uint32_t(tt.ranks[k]));
    const int eb = num_format_bytes(s_.cores);
    for (const std::vector<double>& core : tt.cores) {
      std::vector<float> f(core.begin(), core.end());
      encode_values(f.data(), int64_t(f.size()), s_.cores, w.extend(f.size() * size_t(eb)),
                    nullptr);
    }
    TACO_ASSERT(int64_t(w.size()) == tt_wire_bytes(tt.modes, tt.ranks, s_.cores), "tt wire size");
    return w.take();
  }

  // TT-SVD's rank k is min(r_{k-1} n_k, the rest's size), capped at R: fixed by the shape with a
  // rank cap; by eps it depends on the spectra (at most the uncapped ranks).
  WireSize wire_size(int64_t rows, int64_t cols) const override {
    const int64_t n = checked_numel(name_, rows, cols);
    const std::vector<int64_t> modes = tt_codec_modes(rows, cols, s_.order);
    std::vector<int64_t> ranks(modes.size() + 1, 1);
    int64_t rest = n;  // elements of modes k, k + 1, ...
    for (size_t k = 0; k + 1 < modes.size(); ++k) {
      rest /= modes[k];
      int64_t r = std::min(ranks[k] * modes[k], rest);
      if (s_.rank > 0) r = std::min(r, s_.rank);
      ranks[k + 1] = std::max<int64_t>(r, 1);
    }
    return {tt_wire_bytes(modes, ranks, s_.cores), s_.rank > 0};
  }

  void decode(const uint8_t* wire, size_t nbytes, int64_t rows, int64_t cols,
              float* out) const override {
    const int64_t n = checked_numel(name_, rows, cols);
    ByteReader rd(wire, nbytes, name_);
    const Header h = read_header(rd, kMagicTT, name_);
    const int d = h.a;
    TACO_REQUIRE_INPUT(h.format == s_.cores && d == s_.order && h.b == 0,
                       "codec {}: header says order {} in {}, expected order {} in {}", name_, d,
                       num_format_name(h.format), s_.order, num_format_name(s_.cores));
    TensorTrain tt;
    int64_t prod = 1;
    for (int k = 0; k < d; ++k) {
      const int64_t m = rd.u32();
      TACO_REQUIRE_INPUT(m >= 1 && m <= n && prod <= n / m,
                         "codec {}: mode sizes do not multiply to {}", name_, n);
      prod *= m;
      tt.modes.push_back(m);
    }
    TACO_REQUIRE_INPUT(prod == n,
                       "codec {}: mode sizes multiply to {}, but [{}, {}] has {} elements", name_,
                       prod, rows, cols, n);
    tt.ranks.assign(size_t(d + 1), 1);
    for (int k = 1; k < d; ++k) {
      const int64_t r = rd.u32();
      TACO_REQUIRE_INPUT(r >= 1 && r <= n, "codec {}: TT rank {} out of range", name_, r);
      tt.ranks[size_t(k)] = r;
    }
    // Validate the size before allocating anything proportional to the ranks.
    double params = 0;
    for (int k = 0; k < d; ++k)
      params += double(tt.ranks[size_t(k)]) * double(tt.modes[size_t(k)]) *
                double(tt.ranks[size_t(k + 1)]);
    TACO_REQUIRE_INPUT(
        params <= double(nbytes),
        "codec {}: wire buffer has {} bytes, too few for the cores its header describes", name_,
        nbytes);
    check_wire_bytes(name_, wire, nbytes, tt_wire_bytes(tt.modes, tt.ranks, s_.cores),
                     wire_size(rows, cols));
    const int eb = num_format_bytes(s_.cores);
    tt.cores.resize(size_t(d));
    for (int k = 0; k < d; ++k) {
      const int64_t cnt = tt.ranks[size_t(k)] * tt.modes[size_t(k)] * tt.ranks[size_t(k + 1)];
      std::vector<float> f(static_cast<size_t>(cnt));
      decode_values(rd.bytes(size_t(cnt * eb)), cnt, s_.cores, 1.0f, f.data());
      tt.cores[size_t(k)].assign(f.begin(), f.end());
    }
    const std::vector<double> full = tt_full(tt);
    for (int64_t i = 0; i < n; ++i) out[i] = float(full[size_t(i)]);
  }

 private:
  TtSpec s_;
  std::string name_, definition_;
};

}  // namespace

std::unique_ptr<Codec> make_tt_codec(const TtSpec& s, std::string name, std::string definition) {
  return std::make_unique<TtCodec>(s, std::move(name), std::move(definition));
}

}  // namespace taco::structured
