// The elementwise steps of a decoder layer at inference, one op each where torch takes several: RMSNorm
// (torch's CPU rms_norm runs as pow, mean, add, rsqrt and two muls), RoPE in place on the fused q/k/v
// output (mul, roll, mul, add), and SwiGLU's silu(gate) * up on the fused gate/up output (split, silu,
// mul). At a decode step each of those torch ops costs more to dispatch than to compute.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "vec.h"

namespace {

constexpr int64_t kGrain = 1 << 15;  // elements per task: small inputs run on the calling thread

void check_rows(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == at::kFloat && t.dim() == 2 && t.stride(1) == 1, op, ": ",
              name, " must be an fp32 CPU matrix with contiguous rows");
}

}  // namespace

// out[n] = x[n] / sqrt(mean(x[n]^2) + eps) * weight, x and out [N, D].
void rms_norm(const at::Tensor& out, const at::Tensor& x, const at::Tensor& weight, double eps) {
  check_rows(out, "rms_norm", "out");
  check_rows(x, "rms_norm", "x");
  const int64_t n = x.size(0), d = x.size(1);
  TORCH_CHECK(out.size(0) == n && out.size(1) == d && weight.is_contiguous() && weight.numel() == d &&
                  weight.scalar_type() == at::kFloat, "rms_norm: shapes do not match");
  const float *px = x.data_ptr<float>(), *pw = weight.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const int64_t xs = x.stride(0), os = out.stride(0);
  at::parallel_for(0, n, std::max<int64_t>(1, kGrain / d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = px + r * xs;
      float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
      for (int64_t i = 0; i < d; ++i) ss += row[i] * row[i];
      const float inv = 1.0f / std::sqrt(ss / static_cast<float>(d) + static_cast<float>(eps));
      float* o = po + r * os;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) o[i] = row[i] * inv * pw[i];
    }
  });
}

// x [N, H, D] (rows of any stride, heads contiguous) rotated in place: x * cos + rotate_half(x) * sin,
// with cos and signed_sin [N, D] as the model builds them (signed_sin's first half negated).
void rope_(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& signed_sin) {
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == at::kFloat && x.dim() == 3 && x.stride(2) == 1 &&
                  x.stride(1) == x.size(2), "rope_: x must be fp32 [N, H, D] with contiguous heads");
  check_rows(cos, "rope_", "cos");
  check_rows(signed_sin, "rope_", "signed_sin");
  const int64_t n = x.size(0), h = x.size(1), d = x.size(2), half = d / 2;
  TORCH_CHECK(d % 2 == 0 && cos.size(0) == n && cos.size(1) == d && signed_sin.size(0) == n &&
                  signed_sin.size(1) == d, "rope_: shapes do not match");
  float* px = x.data_ptr<float>();
  const float *pc = cos.data_ptr<float>(), *ps = signed_sin.data_ptr<float>();
  const int64_t xs = x.stride(0), cs = cos.stride(0), ss = signed_sin.stride(0);
  at::parallel_for(0, n, std::max<int64_t>(1, kGrain / (h * d)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *c = pc + r * cs, *s = ps + r * ss;
      for (int64_t j = 0; j < h; ++j) {
        float* v = px + r * xs + j * d;
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[i], b = v[i + half];
          v[i] = a * c[i] + b * s[i];
          v[i + half] = b * c[i + half] + a * s[i + half];
        }
      }
    }
  });
}

// out [N, I] = silu(gate_up[:, :I]) * gate_up[:, I:].
void silu_mul(const at::Tensor& out, const at::Tensor& gate_up) {
  check_rows(out, "silu_mul", "out");
  check_rows(gate_up, "silu_mul", "gate_up");
  const int64_t n = gate_up.size(0), inter = out.size(1);
  TORCH_CHECK(out.size(0) == n && gate_up.size(1) == 2 * inter, "silu_mul: shapes do not match");
  const float* pg = gate_up.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const int64_t gs = gate_up.stride(0), os = out.stride(0);
  at::parallel_for(0, n, std::max<int64_t>(1, kGrain / inter), [&](int64_t r0, int64_t r1) {
    std::vector<float> e(inter);
    for (int64_t r = r0; r < r1; ++r) {
      const float *g = pg + r * gs, *u = g + inter;
#pragma omp simd
      for (int64_t i = 0; i < inter; ++i) e[i] = -g[i];
      exp_inplace(e.data(), inter);
      float* o = po + r * os;
#pragma omp simd
      for (int64_t i = 0; i < inter; ++i) o[i] = g[i] / (1.0f + e[i]) * u[i];
    }
  });
}

TORCH_LIBRARY_FRAGMENT(temper, m) {
  m.def("rms_norm(Tensor(a!) out, Tensor x, Tensor weight, float eps) -> ()");
  m.def("rope_(Tensor(a!) x, Tensor cos, Tensor signed_sin) -> ()");
  m.def("silu_mul(Tensor(a!) out, Tensor gate_up) -> ()");
}

TORCH_LIBRARY_IMPL(temper, CPU, m) {
  m.impl("rms_norm", &rms_norm);
  m.impl("rope_", &rope_);
  m.impl("silu_mul", &silu_mul);
}
