// Plain sampling (temperature only: no penalty, no truncation) of many rows in one pass over their logits:
// each row's peak, then exp(x - peak) summed per block of 1024 tokens in double, the block holding
// u * total found from the block sums and the token within it from a double cumulative sum (the torch
// path's two-level inverse CDF, sampler.py), and the token's logprob log_softmax(x)[token]. torch takes a
// dozen passes and as many fresh [R, V] tensors for the same.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "vec.h"

namespace {

constexpr int64_t kBlock = 1024;

// Row of v logits at temperature t: the token drawn with uniform u, and its logprob.
void sample_row(const float* logits, int64_t v, float t, double u, int64_t* token, float* logprob) {
  std::vector<float> x(v);
  float peak = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : peak)
  for (int64_t i = 0; i < v; ++i) {
    x[i] = logits[i] / t;
    peak = x[i] > peak ? x[i] : peak;
  }
  const int64_t nb = (v + kBlock - 1) / kBlock;
  std::vector<double> cdf(nb);
  std::vector<float> w(kBlock);
  double total = 0.0;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t n = std::min(kBlock, v - b * kBlock);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) w[i] = x[b * kBlock + i] - peak;
    exp_inplace(w.data(), n);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += w[i];
    total += sum;
    cdf[b] = total;
  }
  const double target = u * total;
  int64_t b = std::lower_bound(cdf.begin(), cdf.end(), target) - cdf.begin();
  b = std::min(b, nb - 1);
  double acc = b ? cdf[b - 1] : 0.0;
  const int64_t n = std::min(kBlock, v - b * kBlock);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) w[i] = x[b * kBlock + i] - peak;
  exp_inplace(w.data(), n);
  int64_t j = 0;
  for (; j < n - 1; ++j) {
    acc += w[j];
    if (acc >= target) break;
  }
  *token = b * kBlock + j;
  *logprob = static_cast<float>(x[*token] - peak - std::log(total));
}

}  // namespace

// tokens [R] (int64) and logprobs [R] (fp32) of rows of logits [R, V] at temperatures [R] with uniforms [R]
// (float64, from each sample's own generator).
void sample_plain(const at::Tensor& tokens, const at::Tensor& logprobs, const at::Tensor& logits,
                  const at::Tensor& temperatures, const at::Tensor& uniforms) {
  TORCH_CHECK(logits.device().is_cpu() && logits.scalar_type() == at::kFloat && logits.dim() == 2 &&
                  logits.stride(1) == 1, "sample_plain: logits must be an fp32 CPU matrix with contiguous rows");
  const int64_t r = logits.size(0), v = logits.size(1);
  TORCH_CHECK(tokens.scalar_type() == at::kLong && tokens.is_contiguous() && tokens.numel() == r &&
                  logprobs.scalar_type() == at::kFloat && logprobs.is_contiguous() && logprobs.numel() == r &&
                  temperatures.scalar_type() == at::kFloat && temperatures.is_contiguous() &&
                  temperatures.numel() == r && uniforms.scalar_type() == at::kDouble && uniforms.is_contiguous() &&
                  uniforms.numel() == r && v >= 1, "sample_plain: shapes or dtypes do not match");
  const float* pl = logits.data_ptr<float>();
  const float* pt = temperatures.data_ptr<float>();
  const double* pu = uniforms.data_ptr<double>();
  int64_t* tok = tokens.data_ptr<int64_t>();
  float* lp = logprobs.data_ptr<float>();
  const int64_t ls = logits.stride(0);
  at::parallel_for(0, r, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) sample_row(pl + i * ls, v, pt[i], pu[i], tok + i, lp + i);
  });
}

TORCH_LIBRARY_FRAGMENT(temper, m) {
  m.def(
      "sample_plain(Tensor(a!) tokens, Tensor(b!) logprobs, Tensor logits, Tensor temperatures, Tensor uniforms) "
      "-> ()");
}

TORCH_LIBRARY_IMPL(temper, CPU, m) { m.impl("sample_plain", &sample_plain); }
