#pragma once
// Warp-group building blocks shared by every fused codec kernel: how one group of G elements
// sits in registers and lanes, the order-fixed lane-tree sum, the order-free maximum and the
// Walsh-Hadamard transform in registers plus warp shuffles. All of it is compile-time layout
// bookkeeping; the arithmetic is exactly the CPU reference's (see src/codecs/codec.hpp).
//
// A group of G = 2^LG elements is spread over 2^LB lanes (consecutive lanes of one warp) with
// 2^R float registers each, LG = R + LB. A layout is a permutation P of the LG element-index
// bits onto LG "positions": positions [0, R) are the bits of the register index, positions
// [R, LG) the bits of the lane index inside the group. P stores the element bit of position p
// in bits [4p, 4p+4). LaneLayout and SectorLayout below are the ones the kernels use.
#include <cstdint>
#include <type_traits>

namespace taco::gpu::detail {

constexpr unsigned kFullMask = 0xffffffffu;

constexpr int perm_bit(uint64_t P, int pos) {
  return int((P >> (4 * pos)) & 0xF);
}
constexpr uint64_t perm_identity(int lg) {
  uint64_t p = 0;
  for (int i = 0; i < lg; ++i) p |= uint64_t(i) << (4 * i);
  return p;
}
constexpr int perm_pos(uint64_t P, int lg, int bit) {
  for (int i = 0; i < lg; ++i)
    if (perm_bit(P, i) == bit) return i;
  return -1;
}
template <int R_, int LB_, uint64_t P_>
struct Layout {
  static constexpr int R = R_, LB = LB_, LG = R_ + LB_;
  static constexpr uint64_t P = P_;
  static constexpr int kRegs = 1 << R_;
  static constexpr int kLanes = 1 << LB_;
  static_assert(LG >= 1 && LG <= 12, "group sizes 2..4096");
  static_assert(LB_ >= 0 && LB_ <= 5, "a group spans at most one warp");

  // Offset inside the group of register r's element (compile-time r).
  static constexpr int reg_offset(int r) {
    int o = 0;
    for (int i = 0; i < R_; ++i)
      if ((r >> i) & 1) o |= 1 << perm_bit(P_, i);
    return o;
  }
  // Offset contributed by the lane bits (lane = warp lane id; its low LB bits index the group).
  __device__ __forceinline__ static int lane_offset(int lane) {
    int o = 0;
#pragma unroll
    for (int j = 0; j < LB_; ++j) o |= ((lane >> j) & 1) << perm_bit(P_, R_ + j);
    return o;
  }
  // log2 of the number of consecutive elements held in consecutive registers: positions
  // 0..k-1 carry element bits 0..k-1.
  static constexpr int run_log2() {
    int k = 0;
    while (k < R_ && perm_bit(P_, k) == k) ++k;
    return k;
  }
};

// The two layouts the kernels load and store in. LaneLayout: lane l of the group holds
// elements [l * 2^R, (l + 1) * 2^R) in order. SectorLayout: each lane's registers hold runs of
// 8 consecutive elements (16 bytes of bf16, 8 of codes), the group's lanes hold consecutive runs,
// and the remaining register bits the high element bits; one warp-wide access of a run then
// covers 8 * 2^LB consecutive elements of each group, whole 32-byte sectors for bf16 values and
// codes alike, where LaneLayout's 16-byte accesses at a lane stride of 32 or 64 bytes write half
// sectors. Groups over 256 take longer runs: the canonical lane of the order-fixed sum (below)
// owns G/32 consecutive elements, which must sit in one lane's registers.
constexpr uint64_t sector_perm(int R, int LB) {
  const int want = R + LB - 5 > 3 ? R + LB - 5 : 3;
  const int run = R < want ? R : want;
  uint64_t p = 0;
  int pos = 0;
  for (int b = 0; b < run; ++b) p |= uint64_t(b) << (4 * pos++);            // registers: the run
  for (int b = run + LB; b < R + LB; ++b) p |= uint64_t(b) << (4 * pos++);  // registers: high bits
  for (int b = run; b < run + LB; ++b) p |= uint64_t(b) << (4 * pos++);     // lanes
  return p;
}
template <int R, int LB>
using LaneLayout = Layout<R, LB, perm_identity(R + LB)>;
template <int R, int LB>
using SectorLayout = Layout<R, LB, sector_perm(R, LB)>;

// ---- maxima over the group (order-free) ----------------------------------------------------
// The max of |v| over one lane's registers, as a pairwise tree: log2(N) dependent steps where a
// running max is N (the encode's 31-step chain of FMNMX after the transform). The max is exact
// and order-free, so the result is the same. lane_absmax: IEEE maxNum (ignores a NaN unless all
// are); lane_absmax_bits: the max of the |v| bit patterns (NaN > Inf > finite).
namespace tree_detail {
// m[i] = op(m[i], m[i + W]) for i < W, then W / 2, ..., 1 (compile-time, fully unrolled)
template <int W, class T, int M, class Op>
__device__ __forceinline__ void fold(T (&m)[M], Op op) {
  if constexpr (W >= 1) {
#pragma unroll
    for (int i = 0; i < W; ++i) m[i] = op(m[i], m[i + W]);
    fold<W / 2>(m, op);
  }
}
}  // namespace tree_detail

template <int N>
__device__ __forceinline__ float lane_absmax(const float (&v)[N]) {
  static_assert(N >= 2 && (N & (N - 1)) == 0, "a power of two of registers");
  float m[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) m[i] = fmaxf(fabsf(v[2 * i]), fabsf(v[2 * i + 1]));
  tree_detail::fold<N / 4>(m, [](float a, float b) { return fmaxf(a, b); });
  return m[0];
}
template <int N>
__device__ __forceinline__ uint32_t lane_absmax_bits(const float (&v)[N]) {
  static_assert(N >= 2 && (N & (N - 1)) == 0, "a power of two of registers");
  uint32_t m[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i)
    m[i] =
        max(__float_as_uint(v[2 * i]) & 0x7fffffffu, __float_as_uint(v[2 * i + 1]) & 0x7fffffffu);
  tree_detail::fold<N / 4>(m, [](uint32_t a, uint32_t b) { return max(a, b); });
  return m[0];
}

// fmaxf over |v| (IEEE maxNum: a NaN is ignored), NaN only when every value is NaN: the CPU's
// TACO rule (a max of |v| bits that skips NaN, NaN for an all-NaN group).
template <class L>
__device__ __forceinline__ float group_absmax_nan(const float (&v)[L::kRegs]) {
  float m = fabsf(v[0]);
#pragma unroll
  for (int r = 1; r < L::kRegs; ++r) m = fmaxf(m, fabsf(v[r]));
#pragma unroll
  for (int j = 0; j < L::LB; ++j) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, 1 << j));
  return m;
}

// Largest |v| over the finite values, as float bits (0 when there is none).
template <class L>
__device__ __forceinline__ uint32_t group_amax_bits_finite(const float (&v)[L::kRegs]) {
  uint32_t m = 0;
#pragma unroll
  for (int r = 0; r < L::kRegs; ++r) {
    const uint32_t a = __float_as_uint(v[r]) & 0x7fffffffu;
    m = max(m, a < 0x7f800000u ? a : 0u);
  }
#pragma unroll
  for (int j = 0; j < L::LB; ++j) m = max(m, __shfl_xor_sync(kFullMask, m, 1 << j));
  return m;
}

// ---- order-fixed sum of squares (the lane-tree order of codec.hpp) ------------------------
// Canonical order for a group of G: C = min(32, G) canonical lanes, canonical lane c owns the
// S = G/C consecutive elements [c*S, (c+1)*S) and sums them left to right; partials combine by
// an xor butterfly over canonical strides C/2, ..., 1. The element bits below log2(S) must sit
// in registers; the canonical-lane bits may be anywhere: a canonical stride whose bit is a
// register bit combines in registers, one whose bit is a lane bit goes through a shuffle.
namespace sumsq {
template <class L, int LgS>
struct Info {
  // Register positions whose element bit is a canonical-lane bit (>= LgS), in position order.
  static constexpr int nc() {
    int n = 0;
    for (int i = 0; i < L::R; ++i)
      if (perm_bit(L::P, i) >= LgS) ++n;
    return n;
  }
  static constexpr int cpos(int c) {  // c-th such position
    for (int i = 0, n = 0; i < L::R; ++i)
      if (perm_bit(L::P, i) >= LgS) {
        if (n == c) return i;
        ++n;
      }
    return -1;
  }
  static constexpr int cindex_of_pos(int pos) {
    for (int c = 0; c < nc(); ++c)
      if (cpos(c) == pos) return c;
    return -1;
  }
  // Register index of the s-th element of a canonical lane, given partial index k.
  static constexpr int reg_index(int s, int k) {
    int r = 0;
    for (int b = 0; b < kreg(); ++b)
      if ((s >> b) & 1) r |= 1 << perm_pos(L::P, L::LG, b);
    for (int c = 0; c < nc(); ++c)
      if ((k >> c) & 1) r |= 1 << cpos(c);
    return r;
  }
  // Element bits [0, kreg) are register bits; bits [kreg, LgS) must then all be lane bits.
  static constexpr int kreg() {
    int k = 0;
    while (k < LgS && perm_pos(L::P, L::LG, k) < L::R) ++k;
    return k;
  }
};

// Combine canonical bit `Bit` (processing from the top bit down to LgS). `Done` marks partial
// indices already folded (only partials k with (k & Done) == 0 are live).
template <class L, int LgS, int Bit, int Done, int NP>
__device__ __forceinline__ float combine(float (&p)[NP], int lane) {
  using I = Info<L, LgS>;
  if constexpr (Bit < LgS) {
    return p[0];
  } else {
    constexpr int pos = perm_pos(L::P, L::LG, Bit);
    if constexpr (pos < L::R) {
      constexpr int c = I::cindex_of_pos(pos);
#pragma unroll
      for (int k = 0; k < NP; ++k)
        if ((k & Done) == 0 && ((k >> c) & 1) == 0) p[k] = __fadd_rn(p[k], p[k | (1 << c)]);
      return combine<L, LgS, Bit - 1, Done | (1 << c), NP>(p, lane);
    } else {
#pragma unroll
      for (int k = 0; k < NP; ++k)
        if ((k & Done) == 0)
          p[k] = __fadd_rn(p[k], __shfl_xor_sync(kFullMask, p[k], 1 << (pos - L::R)));
      return combine<L, LgS, Bit - 1, Done, NP>(p, lane);
    }
  }
}
}  // namespace sumsq

// Sum of v^2 over the group in the canonical lane-tree order for group size 2^L::LG. Every
// lane of the group gets the same value.
template <class L>
__device__ __forceinline__ float group_sum_squares(const float (&v)[L::kRegs], int lane) {
  constexpr int LgC = L::LG < 5 ? L::LG : 5;  // log2 of the canonical lane count
  constexpr int LgS = L::LG - LgC;
  using I = sumsq::Info<L, LgS>;
  constexpr int K = I::kreg();  // low element bits held in registers
  static_assert(K == LgS, "a canonical lane's elements must sit in one lane's registers");
  constexpr int NP = 1 << I::nc();
  float p[NP];
#pragma unroll
  for (int k = 0; k < NP; ++k) {
    // p = v[first]^2; p = fma(v[next], v[next], p) ... (hadamard.hpp lane_tree_sum_squares)
    float acc = __fmul_rn(v[I::reg_index(0, k)], v[I::reg_index(0, k)]);
#pragma unroll
    for (int s = 1; s < (1 << K); ++s) {
      const float x = v[I::reg_index(s, k)];
      acc = __fmaf_rn(x, x, acc);
    }
    p[k] = acc;
  }
  return sumsq::combine<L, LgS, L::LG - 1, 0, NP>(p, lane);
}

// ---- Walsh-Hadamard transform -------------------------------------------------------------
// Butterflies (a, b) -> (a + b, a - b) over element strides 1, 2, ..., G/2 in that order (the
// CPU reference's order; floating-point results depend on it). A stage whose bit sits in the
// registers is done in registers; a stage whose bit sits in the lanes exchanges every register
// with the partner lane and combines with one FMA by +-1 (exact: the product is the operand),
// two instructions per element, fewer than trading the lane bit for a register bit first (half
// the registers cross, but three selects per exchanged pair, three instructions per element).
// The transform keeps the layout.
namespace fwht_detail {
template <int R, int Pos>
__device__ __forceinline__ void reg_butterfly(float (&v)[1 << R]) {
#pragma unroll
  for (int r = 0; r < (1 << R); ++r)
    if (((r >> Pos) & 1) == 0) {
      const float a = v[r], b = v[r | (1 << Pos)];
      v[r] = __fadd_rn(a, b);
      v[r | (1 << Pos)] = __fsub_rn(a, b);
    }
}

// The lower lane of a pair holds a and gets a + b = fma(+1, a, b); the upper holds b and gets
// a - b = fma(-1, b, a): the same roundings (and signed zeros) as the CPU's add and subtract.
template <int R, int J>
__device__ __forceinline__ void lane_butterfly(float (&v)[1 << R], int lane) {
  const float sign = ((lane >> J) & 1) ? -1.0f : 1.0f;
#pragma unroll
  for (int r = 0; r < (1 << R); ++r)
    v[r] = __fmaf_rn(sign, v[r], __shfl_xor_sync(kFullMask, v[r], 1 << J));
}

// Stages B .. End - 1.
template <int R, int LB, uint64_t P, int B, int End>
__device__ __forceinline__ void run(float (&v)[1 << R], int lane) {
  constexpr int LG = R + LB;
  if constexpr (B < End) {
    constexpr int pos = perm_pos(P, LG, B);
    if constexpr (pos < R)
      reg_butterfly<R, pos>(v);
    else
      lane_butterfly<R, pos - R>(v, lane);
    run<R, LB, P, B + 1, End>(v, lane);
  }
}

// The first stage whose bit is not a register bit of L (LG when all are).
template <class L>
constexpr int first_lane_stage() {
  int b = 0;
  while (b < L::LG && perm_pos(L::P, L::LG, b) < L::R) ++b;
  return b;
}
template <class L>
constexpr bool reg_stages(int begin, int end) {
  for (int b = begin; b < end; ++b)
    if (perm_pos(L::P, L::LG, b) >= L::R) return false;
  return true;
}
}  // namespace fwht_detail

// Unnormalised transform H_G v (the caller multiplies by float(1/sqrt(G)) afterwards).
template <class L>
__device__ __forceinline__ void fwht(float (&v)[L::kRegs], int lane) {
  fwht_detail::run<L::R, L::LB, L::P, 0, L::LG>(v, lane);
}

// ---- regrouping through shared memory --------------------------------------------------------
// Moves a group of 128 from layout In to layout Out through a per-group scratch area of
// kRegroupFloats floats (16-byte aligned, private to the warp), in runs of 4 elements: each lane
// stores its registers and loads its new ones with one 16-byte access per 4 elements. Element e
// sits at float regroup_at(e) = e + 8 * (e >> 5): rows of 32 elements at a pitch of 40 floats,
// groups 41 x 16 bytes apart. The padding makes both directions between LaneLayout<5, 2> and
// SectorLayout<5, 2> free of bank conflicts: the 8 lanes of a 16-byte access phase (2 groups x
// 4 lanes) hit 8 different 16-byte bank columns, since the lanes' slots differ by 2 (mod 8) and
// the groups' by an odd number. Offsets of disjoint element bits add, so a register's part is an
// immediate.
constexpr int kRegroupFloats = 164;
constexpr int regroup_at(int e) {
  return e + 8 * (e >> 5);
}

template <class In, class Out>
__device__ __forceinline__ void regroup(float (&v)[In::kRegs], int lane, float* grp) {
  static_assert(In::LG == 7 && Out::LG == 7 && In::R == Out::R,
                "regroup: groups of 128 (the padding above)");
  static_assert(In::run_log2() >= 2 && Out::run_log2() >= 2,
                "regroup: runs of at least 4 elements");
  __syncwarp();  // every lane has read the previous group's values
  float* w = grp + regroup_at(In::lane_offset(lane));
#pragma unroll
  for (int k = 0; k < In::kRegs / 4; ++k)
    *reinterpret_cast<float4*>(w + regroup_at(In::reg_offset(4 * k))) =
        make_float4(v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]);
  __syncwarp();
  const float* r = grp + regroup_at(Out::lane_offset(lane));
#pragma unroll
  for (int k = 0; k < Out::kRegs / 4; ++k) {
    const float4 f = *reinterpret_cast<const float4*>(r + regroup_at(Out::reg_offset(4 * k)));
    v[4 * k] = f.x;
    v[4 * k + 1] = f.y;
    v[4 * k + 2] = f.z;
    v[4 * k + 3] = f.w;
  }
}

// H_G v taking the group from layout In (where it is) to layout Out (where the caller wants
// it). With In != Out the stages of In's register bits run first, the group regroups through
// `grp`, and the remaining stages run on Out's register bits: no warp shuffle, where one layout
// alone leaves LB stages to shuffles and FMAs (2 instructions per element each, against about 1
// for a register stage plus 0.5 for the regrouping).
template <class In, class Out>
__device__ __forceinline__ void fwht_to(float (&v)[In::kRegs], int lane, float* grp) {
  if constexpr (std::is_same_v<In, Out>) {
    fwht<In>(v, lane);
  } else {
    constexpr int split = fwht_detail::first_lane_stage<In>();
    static_assert(fwht_detail::reg_stages<Out>(split, Out::LG),
                  "fwht_to: Out must hold the later stages' bits in registers");
    fwht_detail::run<In::R, In::LB, In::P, 0, split>(v, lane);
    regroup<In, Out>(v, lane, grp);
    fwht_detail::run<Out::R, Out::LB, Out::P, split, Out::LG>(v, lane);
  }
}

}  // namespace taco::gpu::detail
