// y = x @ w.T (+ bias) for 1 to 4 rows of x (decoding a few sequences, verifying short drafts): fp32, w
// row-major [N, K] as nn.Linear keeps it. Such a product reads every weight once for very little
// arithmetic, so it runs at memory speed or not at all: rows of w are streamed once, in contiguous ranges
// per thread, each multiplied into all of x's rows held in registers, the next rows prefetched. Measured
// (SmolLM2's layers and head, 2 threads, one row): 22.5 GB/s against oneDNN's 19.3 and a plain sum's 26.2;
// 2 and 3 rows 20 GB/s against oneDNN's 16-18, 4 rows level.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>

#include "vec.h"

namespace {

// Output rows [n0, n1) of M input rows: R weight rows at a time, M x R accumulators of W floats.
template <int M>
void rows_range(const float* x, int64_t xs, const float* w, int64_t k, const float* bias, float* y, int64_t ys,
                int64_t n0, int64_t n1) {
  // as many weight rows at a time as the accumulators allow (24 of 32 vector registers): more rows streamed
  // at once keep more memory requests in flight
  constexpr int R = std::max(1, std::min(8, 24 / M));
  const int64_t kv = k / W * W;
  int64_t n = n0;
  for (; n + R <= n1; n += R) {
    vf acc[M][R];
    for (int m = 0; m < M; ++m)
      for (int r = 0; r < R; ++r) acc[m][r] = vf{};
    for (int64_t i = 0; i < kv; i += W) {
      vf wv[R];
      for (int r = 0; r < R; ++r) {
        __builtin_prefetch(w + (n + R + r) * k + i, 0, 0);  // the next tile's rows, one line per row
        wv[r] = vload(w + (n + r) * k + i);
      }
      for (int m = 0; m < M; ++m) {
        const vf xv = vload(x + m * xs + i);
        for (int r = 0; r < R; ++r) acc[m][r] += xv * wv[r];
      }
    }
    for (int m = 0; m < M; ++m)
      for (int r = 0; r < R; ++r) {
        float s = hsum(acc[m][r]);
        for (int64_t i = kv; i < k; ++i) s += x[m * xs + i] * w[(n + r) * k + i];
        y[m * ys + n + r] = bias ? s + bias[n + r] : s;
      }
  }
  for (; n < n1; ++n)  // rows left over
    for (int m = 0; m < M; ++m) {
      float s = 0.0f;
      for (int64_t i = 0; i < k; ++i) s += x[m * xs + i] * w[n * k + i];
      y[m * ys + n] = bias ? s + bias[n] : s;
    }
}

struct Rows {
  template <int M>
  static void run(const float* x, int64_t xs, const float* w, int64_t k, const float* bias, float* y, int64_t ys,
                  int64_t n0, int64_t n1) {
    rows_range<M>(x, xs, w, k, bias, y, ys, n0, n1);
  }
};

}  // namespace

// out [M, N] = x [M, K] @ w [N, K].T (+ bias [N]); M from 1 to kMaxRows, rows of x and out contiguous.
void small_gemm(const at::Tensor& out, const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && out.dim() == 2, "small_gemm: x, w and out must be matrices");
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  TORCH_CHECK(m >= 1 && m <= kMaxRows, "small_gemm: ", m, " rows (1 to ", kMaxRows, ")");
  TORCH_CHECK(w.size(1) == k && out.size(0) == m && out.size(1) == n, "small_gemm: shapes do not match");
  for (const at::Tensor* t : {&out, &x, &w})
    TORCH_CHECK(t->device().is_cpu() && t->scalar_type() == at::kFloat && t->stride(1) == 1,
                "small_gemm: fp32 CPU tensors with contiguous rows");
  TORCH_CHECK(w.is_contiguous(), "small_gemm: w must be contiguous");
  const float* b = nullptr;
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK(bias->is_contiguous() && bias->numel() == n && bias->scalar_type() == at::kFloat,
                "small_gemm: bias must be fp32 [N]");
    b = bias->data_ptr<float>();
  }
  const float *px = x.data_ptr<float>(), *pw = w.data_ptr<float>();
  float* py = out.data_ptr<float>();
  const int64_t xs = x.stride(0), ys = out.stride(0);
  // ranges of 64 weight rows (16 KB and more each): enough work per range to hide the loop's set-up
  at::parallel_for(0, n, 64, [&](int64_t n0, int64_t n1) {
    with_count<kMaxRows, Rows>(m, px, xs, pw, k, b, py, ys, n0, n1);
  });
}

TORCH_LIBRARY_FRAGMENT(temper, m) { m.def("small_gemm(Tensor(a!) out, Tensor x, Tensor w, Tensor? bias) -> ()"); }

TORCH_LIBRARY_IMPL(temper, CPU, m) { m.impl("small_gemm", &small_gemm); }
