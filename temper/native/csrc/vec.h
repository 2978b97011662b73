// Helpers shared by temper's kernels: one GCC vector of W floats (16 with AVX-512, else 8), unaligned
// loads and stores, a horizontal sum, a dispatch from a runtime count to a template, and a vectorised exp.
#pragma once

#include <cstdint>
#include <cmath>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
constexpr int W = 16;
#else
constexpr int W = 8;
#endif

using vf = float __attribute__((vector_size(W * 4)));
using vfu = float __attribute__((vector_size(W * 4), aligned(4), may_alias));

inline vf vload(const float* p) { return *reinterpret_cast<const vfu*>(p); }
inline void vstore(float* p, vf v) { *reinterpret_cast<vfu*>(p) = v; }
inline float hsum(vf v) {
#if defined(__AVX512F__)
  return _mm512_reduce_add_ps(reinterpret_cast<__m512>(v));
#else
  float s = 0.0f;
  for (int i = 0; i < W; ++i) s += v[i];
  return s;
#endif
}

// The horizontal sums of four vectors at once: {hsum(a), hsum(b), hsum(c), hsum(d)}. A tree of shuffles and
// adds over all four, where four separate horizontal sums are four serial chains (what bounded scoring
// keys one query at a time).
inline void hsum4(vf a, vf b, vf c, vf d, float* out) {
#if defined(__AVX512F__)
  const vf x = __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
               __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  const vf y = __builtin_shufflevector(c, d, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
               __builtin_shufflevector(c, d, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  // lanes [a 4 | b 4 | c 4 | d 4]
  const vf z = __builtin_shufflevector(x, y, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
               __builtin_shufflevector(x, y, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  // lanes [a 2 | b 2 | c 2 | d 2 | ...]
  const vf w = __builtin_shufflevector(z, z, 0, 1, 4, 5, 8, 9, 12, 13, 0, 1, 4, 5, 8, 9, 12, 13) +
               __builtin_shufflevector(z, z, 2, 3, 6, 7, 10, 11, 14, 15, 2, 3, 6, 7, 10, 11, 14, 15);
  for (int i = 0; i < 4; ++i) out[i] = w[2 * i] + w[2 * i + 1];
#else
  out[0] = hsum(a), out[1] = hsum(b), out[2] = hsum(c), out[3] = hsum(d);
#endif
}

constexpr int kMaxRows = 4;  // small_gemm's most rows (from 5 rows on, oneDNN's GEMM was as fast or faster here)

// Calls F::template run<N>(args...) for the runtime n in [1, MAX].
template <int MAX, typename F, typename... A>
inline void with_count(int64_t n, A&&... a) {
  if constexpr (MAX >= 1) {
    if (n == MAX) return F::template run<MAX>(a...);
    with_count<MAX - 1, F>(n, a...);
  }
}

// exp(x) in place: 0 below -87 (where it is under FLT_MIN; -inf for masked scores), clamped at 88 above.
// Cephes' expf polynomial (about 1 ulp), written to vectorise.
inline void exp_inplace(float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float c = x[i] > -87.0f ? x[i] : -87.0f;
    const float v = c < 88.0f ? c : 88.0f;
    const float k = std::nearbyint(v * 1.44269504088896341f);
    const float r = v - k * 0.693359375f + k * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t bits = (static_cast<int32_t>(k) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof(scale));
    x[i] = x[i] > -87.0f ? p * scale : 0.0f;
  }
}
