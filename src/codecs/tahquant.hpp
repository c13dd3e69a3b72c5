#pragma once
// TAH-Quant (arXiv 2506.01352; reference code heguangxin/TAH-Quant compress/tah_modules.py;
// methods.md section 3): per-token bit widths chosen by entropy, pivot swap + Hadamard on tiles
// dominated by one value, asymmetric min-max quantization per tile with fp16 zero and scale.
//
// Input [rows = tokens S, cols = channels C], C a multiple of the tile (InputError otherwise).
// Encode:
//  1. Non-finite inputs count as 0. Token entropy (fp64): p = |x| / (sum |x| + 1e-30),
//     H = -sum p log(p + 1e-30), both sums in 32 strided lanes combined as a warp tree and the
//     log a fixed series (codecs/tahquant_hd.hpp: the GPU kernels compute the same bits).
//  2. n_lo = floor(S * (100 - pct) / 100) tokens with the lowest entropy (ties: lower index
//     first) get lo bits, the rest hi bits. Tokens are sent reordered: the low group in index
//     order, then the high group in index order; a token bitmap (1 = low) is sent.
//  3. Tile = `tile` consecutive channels of a token. If first >= 2 * second (the two largest
//     magnitudes, duplicates counted), the tile is flagged: its largest-magnitude element (first
//     index) is swapped to position 0 and the tile is transformed by H_tile / sqrt(tile)
//     (codecs/hadamard.hpp order). A tile bitmap and each flagged tile's pivot index
//     (log2(tile) bits) are sent.
//  4. Per tile, with b bits and qmax = 2^b - 1: z = the largest fp16 <= min(v) (clamped to
//     +-65504); s = the smallest fp16 >= max(v - z) / qmax (at least 2^-24, at most 65504);
//     q = clamp(rne((v - z) / s), 0, qmax). Decode: v = q * s + z, then the inverse transform and
//     swap on flagged tiles, then the tokens go back to their places.
//  Differences from the reference code (deliberate): the encoder quantizes with the fp16 z and
//  s it sends (the reference quantizes with unrounded ones and sends fp16 copies), rounding them
//  outward so nothing clips; n_lo uses exact integer arithmetic (the reference's
//  int(S * (1 - 0.8)) floors 0.9999... to 0 for S = 5); the Hadamard is the butterfly FWHT, not
//  a matmul; entropy ties are broken by token index (torch.argsort is not stable).
//
// Wire (bit streams are LSB-first: bit i is bit i % 8 of byte i / 8):
//  [token bitmap: ceil(S / 8) B][tile bitmap: ceil(tiles / 8) B]
//  [codes: n_lo * C * lo + (S - n_lo) * C * hi bits, tokens in sent order, rounded up to bytes]
//  [zeros: tiles x fp16][scales: tiles x fp16][pivots: flagged x log2(tile) bits, rounded up]
//  tiles = S * C / tile, in sent token order. The size depends on how many tiles are flagged;
//  decode() also takes a wire padded with zero bytes to wire_size()'s bound (every tile flagged),
//  as a transport of fixed-size slots (taco.codec) carries it.
#include "codecs/codec.hpp"
#include "codecs/tahquant_hd.hpp"
#include "codecs/variant.hpp"

namespace taco {

class TahQuantCodec final : public Codec {
 public:
  TahQuantCodec(const TahSpec& spec, std::string name);

  const std::string& name() const override { return name_; }
  nlohmann::json params() const override;
  const VariantSpec* variant_spec() const override { return &variant_; }
  std::vector<uint8_t> encode(const float* x, int64_t rows, int64_t cols,
                              EncodeStats* stats = nullptr) const override;
  void decode(const uint8_t* wire, size_t nbytes, int64_t rows, int64_t cols,
              float* out) const override;

  // Every tile flagged is the most: the pivots are the only part whose size depends on the data.
  WireSize wire_size(int64_t rows, int64_t cols) const override {
    return {layout(rows, cols).bound, false};
  }

  const TahSpec& spec() const { return t_; }
  int64_t low_tokens(int64_t rows) const { return rows * (100 - t_.hi_pct) / 100; }
  // Wire bytes for a shape with `flagged` transformed tiles.
  int64_t wire_bytes(int64_t rows, int64_t cols, int64_t flagged) const {
    return layout(rows, cols).bytes(flagged);
  }
  // Where the parts of a [rows, cols] block's wire lie (InputError for a shape it cannot take).
  tah::Layout layout(int64_t rows, int64_t cols) const;
  // Bytes encode() wrote, read from the tile bitmap of a wire padded to wire_size()'s bound.
  int64_t encoded_bytes(const uint8_t* wire, int64_t rows, int64_t cols) const;

 private:
  TahSpec t_;
  VariantSpec variant_;  // t_ as a variant
  std::string name_;
  int pivot_bits_;
};

}  // namespace taco
