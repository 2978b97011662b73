// Vector helpers shared by the engine's kernels: one GCC vector of W floats (16 with AVX-512, else 8),
// unaligned loads and stores, a horizontal sum, and a dispatch from a runtime count to a template.
#pragma once

#include <cstdint>

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

constexpr int kMaxRows = 2;  // small_gemm's most rows (from 3 rows on, oneDNN's GEMM was faster here)

// Calls F::template run<N>(args...) for the runtime n in [1, MAX].
template <int MAX, typename F, typename... A>
inline void with_count(int64_t n, A&&... a) {
  if constexpr (MAX >= 1) {
    if (n == MAX) return F::template run<MAX>(a...);
    with_count<MAX - 1, F>(n, a...);
  }
}
