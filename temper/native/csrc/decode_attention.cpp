// Decode attention on the CPU for the rollout engine: one call per layer and step (see native_kernels.py).
//
// For every decoding row b and kv head h it stores the row's new key and value (in the paged cache at
// its (block, offset) and in the decode buffer at its next position), then attends the row's G query
// heads to its group's shared prefix (if any: the cascade's kept prefixes, keys transposed) and to its
// own keys in the decode buffer with one running (online) softmax, and writes the normalised output.
// A group's shared prefix is read once for all its rows: the work items are (group, head) and (solo row,
// head), run in parallel on torch's threads. fp32 throughout; scores are kept for one chunk of keys at a
// time, so memory does not grow with context.
//
// `segment_attention` attends a few new tokens of one sequence (verifying speculative drafts) to its keys
// in the paged cache, read through its block table in place: the torch path gathers the whole context
// every layer and runs SDPA with a mask it builds.
//
// The inner loops are register tiles over compile-time head dims (16, 32, 64, 128) of W-float vectors
// (vec.h); runtime-length inner loops over 64 floats made the op ~2x slower here (their set-up cost is paid
// per key).

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "vec.h"

namespace {

constexpr int64_t kChunk = 256;  // keys scored at a time (their scores stay in L1)
constexpr int kQT = 6;           // queries per tile against transposed keys (6 x 4 vectors of accumulators)

// Key or value rows by position t: contiguous rows, or rows of the paged cache through a block table.
struct Contiguous {
  const float* p;
  int64_t stride;
  const float* operator()(int64_t t) const { return p + t * stride; }
};
struct Paged {
  const float* head;  // one kv head's [blocks, block_size, D]
  const int64_t* table;
  int64_t bs, d;
  const float* operator()(int64_t t) const { return head + (table[t / bs] * bs + t % bs) * d; }
};

template <int D>
struct Heads {
  static constexpr int DV = D / W;                             // vectors per head row
  static constexpr int QPV = std::max(1, std::min(8, 24 / DV));  // queries per value tile

  // The running softmax of M queries (rows padded to a multiple of kQT): peak, sum of weights,
  // unnormalised output, and one chunk's scores.
  struct Running {
    int64_t m;
    std::vector<float> peak, total, acc, scores;
    explicit Running(int64_t m_)
        : m(m_), peak(m_, -std::numeric_limits<float>::infinity()), total(m_, 0.0f),
          acc(pad(m_) * D, 0.0f), scores(pad(m_) * kChunk) {}
    static int64_t pad(int64_t m) { return (m + kQT - 1) / kQT * kQT; }
  };

  // acc[q] += sum_t w[q][t] * v(t0 + t) for QB queries from q0, keys t < n.
  struct ValueTile {
    template <int QB, typename Rows>
    static void run(Running& r, int64_t q0, int64_t n, const Rows& v, int64_t t0) {
      vf a[QB][DV];
      for (int j = 0; j < QB; ++j)
        for (int x = 0; x < DV; ++x) a[j][x] = vload(r.acc.data() + (q0 + j) * D + x * W);
      const float* w = r.scores.data() + q0 * kChunk;
      for (int64_t t = 0; t < n; ++t) {
        vf vv[DV];
        const float* vt = v(t0 + t);
        for (int x = 0; x < DV; ++x) vv[x] = vload(vt + x * W);
        for (int j = 0; j < QB; ++j) {
          const float wj = w[j * kChunk + t];
          for (int x = 0; x < DV; ++x) a[j][x] += wj * vv[x];
        }
      }
      for (int j = 0; j < QB; ++j)
        for (int x = 0; x < DV; ++x) vstore(r.acc.data() + (q0 + j) * D + x * W, a[j][x]);
    }
  };

  // Folds the chunk's scores of queries [q0, q0 + nq) (keys t0 + t, t < n) into the running softmax, then
  // the values.
  template <typename Rows>
  static void fold(Running& r, int64_t q0, int64_t nq, int64_t n, const Rows& v, int64_t t0) {
    for (int64_t q = q0; q < q0 + nq; ++q) {
      float* s = r.scores.data() + q * kChunk;
      float top = r.peak[q];
#pragma omp simd reduction(max : top)
      for (int64_t t = 0; t < n; ++t) top = s[t] > top ? s[t] : top;
      if (top > r.peak[q]) {
        float shrink = r.peak[q] - top;
        exp_inplace(&shrink, 1);
        r.total[q] *= shrink;
        float* a = r.acc.data() + q * D;
        for (int x = 0; x < DV; ++x) vstore(a + x * W, vload(a + x * W) * shrink);
        r.peak[q] = top;
      }
#pragma omp simd
      for (int64_t t = 0; t < n; ++t) s[t] -= top;
      exp_inplace(s, n);
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t t = 0; t < n; ++t) sum += s[t];
      r.total[q] += sum;
    }
    for (int64_t q = q0; q < q0 + nq; q += QPV)
      with_count<QPV, ValueTile>(std::min<int64_t>(QPV, q0 + nq - q), r, q, n, v, t0);
  }

  // scores[q][t..t + KV * W) for kQT queries from q0 against keys stored transposed, kt[i * ld + t].
  template <int KV>
  static void key_tile(Running& r, const float* qs, int64_t q0, const float* kt, int64_t ld, int64_t t) {
    vf a[kQT][KV];
    for (int j = 0; j < kQT; ++j)
      for (int x = 0; x < KV; ++x) a[j][x] = vf{};
    for (int64_t i = 0; i < D; ++i) {
      vf kk[KV];
      for (int x = 0; x < KV; ++x) kk[x] = vload(kt + i * ld + t + x * W);
      for (int j = 0; j < kQT; ++j) {
        const float qi = qs[(q0 + j) * D + i];
        for (int x = 0; x < KV; ++x) a[j][x] += qi * kk[x];
      }
    }
    for (int j = 0; j < kQT; ++j)
      for (int x = 0; x < KV; ++x) vstore(r.scores.data() + (q0 + j) * kChunk + (t % kChunk) + x * W, a[j][x]);
  }

  // All of Running's queries (qs: [pad(M), D], zero padded) against len keys stored transposed.
  static void attend_transposed(Running& r, const float* qs, const float* kt, int64_t ld, int64_t len,
                                const float* v, int64_t vstride) {
    const int64_t mp = Running::pad(r.m);
    for (int64_t t0 = 0; t0 < len; t0 += kChunk) {
      const int64_t n = std::min(kChunk, len - t0);
      for (int64_t q0 = 0; q0 < mp; q0 += kQT) {
        int64_t t = t0;
        for (; t + 4 * W <= t0 + n; t += 4 * W) key_tile<4>(r, qs, q0, kt, ld, t);
        for (; t + W <= t0 + n; t += W) key_tile<1>(r, qs, q0, kt, ld, t);
        for (; t < t0 + n; ++t) {  // keys left over (prefixes are whole blocks: only blocks < W tokens)
          for (int64_t j = q0; j < q0 + kQT; ++j) {
            float s = 0.0f;
            for (int64_t i = 0; i < D; ++i) s += qs[j * D + i] * kt[i * ld + t];
            r.scores[j * kChunk + (t - t0)] = s;
          }
        }
      }
      fold(r, 0, r.m, n, Contiguous{v, vstride}, t0);
    }
  }

  // Queries [q0, q0 + nq) against len keys by row, k(t); with `visible`, query q sees keys t < visible[q].
  template <typename Rows>
  static void attend_rows(Running& r, const float* qs, int64_t q0, int64_t nq, const Rows& k, int64_t len,
                          const Rows& v, const int64_t* visible = nullptr) {
    constexpr float kMasked = -std::numeric_limits<float>::infinity();
    for (int64_t t0 = 0; t0 < len; t0 += kChunk) {
      const int64_t n = std::min(kChunk, len - t0);
      int64_t t = 0;
      for (; t + 4 <= n; t += 4) {  // four keys at a time: their four dot products reduced together
        vf kk[4][DV];
        for (int u = 0; u < 4; ++u) {
          const float* kt = k(t0 + t + u);
          for (int x = 0; x < DV; ++x) kk[u][x] = vload(kt + x * W);
        }
        for (int64_t q = q0; q < q0 + nq; ++q) {
          vf p[4];
          for (int u = 0; u < 4; ++u) {
            p[u] = vload(qs + q * D) * kk[u][0];
            for (int x = 1; x < DV; ++x) p[u] += vload(qs + q * D + x * W) * kk[u][x];
          }
          float* s = r.scores.data() + q * kChunk + t;
          hsum4(p[0], p[1], p[2], p[3], s);
          if (visible)
            for (int u = 0; u < 4; ++u) s[u] = t0 + t + u < visible[q] ? s[u] : kMasked;
        }
      }
      for (; t < n; ++t) {
        vf kk[DV];
        const float* kt = k(t0 + t);
        for (int x = 0; x < DV; ++x) kk[x] = vload(kt + x * W);
        for (int64_t q = q0; q < q0 + nq; ++q) {
          vf p = vload(qs + q * D) * kk[0];
          for (int x = 1; x < DV; ++x) p += vload(qs + q * D + x * W) * kk[x];
          const bool seen = !visible || t0 + t < visible[q];
          r.scores[q * kChunk + t] = seen ? hsum(p) : kMasked;
        }
      }
      fold(r, q0, nq, n, v, t0);
    }
  }
};

struct Args {
  int64_t hq, hkv, g, cap, bs, nblocks, groups, plen;
  const int64_t *len, *blk, *off, *glen;
  float* out;
  const float *q, *k, *v, *prefix_k, *prefix_v;
  float *kbuf, *vbuf, *kcache, *vcache;
  int64_t qs0, qs1, ks0, ks1, vs0, vs1;
  float scale;
};

// One work item: rows (one group's, or one solo row) for kv head h.
template <int D>
void attend_item(const Args& a, const std::vector<int64_t>& rows, int64_t item, int64_t h) {
  using H = Heads<D>;
  const int64_t nr = static_cast<int64_t>(rows.size()), g = a.g;
  typename H::Running run(nr * g);
  std::vector<float> qs(H::Running::pad(nr * g) * D, 0.0f);
  for (int64_t j = 0; j < nr; ++j) {
    const int64_t r = rows[j];
    for (int64_t x = 0; x < g; ++x) {
      const float* src = a.q + r * a.qs0 + (h * g + x) * a.qs1;
      for (int64_t i = 0; i < D; ++i) qs[(j * g + x) * D + i] = src[i] * a.scale;
    }
    // the row's new key and value: decode buffer slot r at its last position, and the paged cache
    const int64_t at_buf = ((r * a.hkv + h) * a.cap + a.len[r] - 1) * D;
    const int64_t at_cache = ((h * a.nblocks + a.blk[r]) * a.bs + a.off[r]) * D;
    std::memcpy(a.kbuf + at_buf, a.k + r * a.ks0 + h * a.ks1, D * sizeof(float));
    std::memcpy(a.vbuf + at_buf, a.v + r * a.vs0 + h * a.vs1, D * sizeof(float));
    std::memcpy(a.kcache + at_cache, a.k + r * a.ks0 + h * a.ks1, D * sizeof(float));
    std::memcpy(a.vcache + at_cache, a.v + r * a.vs0 + h * a.vs1, D * sizeof(float));
  }
  if (item < a.groups && a.glen[item] > 0) {  // the shared prefix, once for all the group's queries
    const float* kt = a.prefix_k + (h * a.groups + item) * D * a.plen;
    const float* vp = a.prefix_v + (h * a.groups + item) * a.plen * D;
    H::attend_transposed(run, qs.data(), kt, a.plen, a.glen[item], vp, D);
  }
  for (int64_t j = 0; j < nr; ++j) {  // each row's own keys
    const int64_t r = rows[j];
    const int64_t at_buf = (r * a.hkv + h) * a.cap * D;
    H::attend_rows(run, qs.data(), j * g, g, Contiguous{a.kbuf + at_buf, D}, a.len[r], Contiguous{a.vbuf + at_buf, D});
    for (int64_t x = 0; x < g; ++x) {
      const int64_t qi = j * g + x;
      const float inv = 1.0f / run.total[qi];
      float* dst = a.out + (r * a.hq + h * g + x) * D;
      const float* acc = run.acc.data() + qi * D;
      for (int64_t i = 0; i < D; ++i) dst[i] = acc[i] * inv;
    }
  }
}

struct SegmentArgs {
  int64_t hq, g, bs, start;
  const float* q;
  int64_t qs0, qs1;
  float* out;
  const float *kcache, *vcache;  // [Hkv, blocks, block_size, D]
  const int64_t* table;
  int64_t nblocks;
  float scale;
};

// Tokens [j0, j1) of a segment for kv head h: token j sees the positions [0, start + j] of its sequence,
// read from the paged cache through its block table (its own new keys were stored there first).
template <int D>
void attend_segment(const SegmentArgs& a, int64_t h, int64_t j0, int64_t j1) {
  using H = Heads<D>;
  const int64_t g = a.g, m = (j1 - j0) * g;
  typename H::Running run(m);
  std::vector<float> qs(H::Running::pad(m) * D, 0.0f);
  std::vector<int64_t> visible(m);
  for (int64_t j = j0; j < j1; ++j)
    for (int64_t x = 0; x < g; ++x) {
      const int64_t qi = (j - j0) * g + x;
      const float* src = a.q + j * a.qs0 + (h * g + x) * a.qs1;
      for (int64_t i = 0; i < D; ++i) qs[qi * D + i] = src[i] * a.scale;
      visible[qi] = a.start + j + 1;
    }
  const int64_t head = h * a.nblocks * a.bs * D;
  const Paged keys{a.kcache + head, a.table, a.bs, D}, values{a.vcache + head, a.table, a.bs, D};
  H::attend_rows(run, qs.data(), 0, m, keys, a.start + j1, values, visible.data());
  for (int64_t j = j0; j < j1; ++j)
    for (int64_t x = 0; x < g; ++x) {
      const int64_t qi = (j - j0) * g + x;
      const float inv = 1.0f / run.total[qi];
      float* dst = a.out + (j * a.hq + h * g + x) * D;
      for (int64_t i = 0; i < D; ++i) dst[i] = run.acc[qi * D + i] * inv;
    }
}

void check(const at::Tensor& t, const char* name, at::ScalarType dtype) {
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == dtype, "decode_attention: ", name, " must be a CPU ",
              c10::toString(dtype), " tensor");
}

}  // namespace

// out [B, Hq, D]; q [B, Hq, D], k and v [B, Hkv, D] (last dim contiguous, any row strides);
// kbuf, vbuf [S >= B, Hkv, C, D] contiguous: row b's own keys in slot b, its new one at lengths[b] - 1;
// kcache, vcache [Hkv, blocks, block_size, D] contiguous: the new key/value go to (blocks[b], offsets[b]);
// prefix_k [Hkv, Gr, D, P] (transposed keys), prefix_v [Hkv, Gr, P, D], prefix_len [Gr], row_group [B]
// (a row's group, -1 for none); with no groups, prefix_* and row_group may be empty. D: 16, 32, 64 or 128.
void decode_attention(const at::Tensor& out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const at::Tensor& kbuf, const at::Tensor& vbuf, const at::Tensor& lengths,
                      const at::Tensor& kcache, const at::Tensor& vcache, const at::Tensor& blocks,
                      const at::Tensor& offsets, const at::Tensor& prefix_k, const at::Tensor& prefix_v,
                      const at::Tensor& prefix_len, const at::Tensor& row_group, double scale) {
  for (const at::Tensor* t : {&out, &q, &k, &v, &kbuf, &vbuf, &kcache, &vcache}) check(*t, "every float tensor", at::kFloat);
  for (const at::Tensor* t : {&lengths, &blocks, &offsets}) check(*t, "every index input", at::kLong);
  const int64_t b = q.size(0), hq = q.size(1), d = q.size(2), hkv = k.size(1);
  TORCH_CHECK(d == 16 || d == 32 || d == 64 || d == 128, "decode_attention: head_dim ", d, " is not 16, 32, 64 or 128");
  TORCH_CHECK(q.stride(2) == 1 && k.stride(2) == 1 && v.stride(2) == 1 && out.is_contiguous(),
              "decode_attention: q, k, v need a contiguous last dim and out must be contiguous");
  TORCH_CHECK(kbuf.is_contiguous() && vbuf.is_contiguous() && kcache.is_contiguous() && vcache.is_contiguous(),
              "decode_attention: the buffer and cache layers must be contiguous");
  TORCH_CHECK(kbuf.size(0) >= b && kbuf.size(1) == hkv && kbuf.size(3) == d && hq % hkv == 0 &&
                  lengths.numel() == b && blocks.numel() == b && offsets.numel() == b,
              "decode_attention: shapes do not match");
  Args a{};
  a.hq = hq, a.hkv = hkv, a.g = hq / hkv, a.cap = kbuf.size(2), a.bs = kcache.size(2), a.nblocks = kcache.size(1);
  a.groups = prefix_len.numel();
  if (a.groups) {
    check(prefix_k, "prefix_k", at::kFloat);
    check(prefix_v, "prefix_v", at::kFloat);
    check(prefix_len, "prefix_len", at::kLong);
    check(row_group, "row_group", at::kLong);
    TORCH_CHECK(prefix_k.is_contiguous() && prefix_v.is_contiguous() && prefix_k.size(1) == a.groups &&
                    prefix_v.size(2) == prefix_k.size(3) && row_group.numel() == b,
                "decode_attention: prefix shapes do not match");
    a.plen = prefix_k.size(3);
    a.prefix_k = prefix_k.data_ptr<float>(), a.prefix_v = prefix_v.data_ptr<float>();
    a.glen = prefix_len.data_ptr<int64_t>();
  }
  a.len = lengths.data_ptr<int64_t>(), a.blk = blocks.data_ptr<int64_t>(), a.off = offsets.data_ptr<int64_t>();
  const int64_t* grp = a.groups ? row_group.data_ptr<int64_t>() : nullptr;
  for (int64_t r = 0; r < b; ++r) {
    TORCH_CHECK(a.len[r] >= 1 && a.len[r] <= a.cap, "decode_attention: row ", r, " length ", a.len[r], " out of range");
    TORCH_CHECK(a.blk[r] >= 0 && a.blk[r] < a.nblocks && a.off[r] >= 0 && a.off[r] < a.bs, "decode_attention: row ", r,
                " writes outside the cache");
    TORCH_CHECK(!grp || grp[r] < a.groups, "decode_attention: row ", r, " names group ", grp[r]);
  }
  for (int64_t i = 0; i < a.groups; ++i)
    TORCH_CHECK(a.glen[i] >= 0 && a.glen[i] <= a.plen, "decode_attention: group ", i, " prefix length out of range");
  // Work items: each group's rows, then each row in no group; every item for every kv head.
  std::vector<std::vector<int64_t>> items(a.groups);
  for (int64_t r = 0; r < b; ++r)
    if (grp && grp[r] >= 0) items[grp[r]].push_back(r);
  for (int64_t r = 0; r < b; ++r)
    if (!grp || grp[r] < 0) items.push_back({r});
  a.out = out.data_ptr<float>();
  a.q = q.data_ptr<float>(), a.k = k.data_ptr<float>(), a.v = v.data_ptr<float>();
  a.kbuf = kbuf.data_ptr<float>(), a.vbuf = vbuf.data_ptr<float>();
  a.kcache = kcache.data_ptr<float>(), a.vcache = vcache.data_ptr<float>();
  a.qs0 = q.stride(0), a.qs1 = q.stride(1), a.ks0 = k.stride(0), a.ks1 = k.stride(1), a.vs0 = v.stride(0),
  a.vs1 = v.stride(1);
  a.scale = static_cast<float>(scale);
  const int64_t jobs = static_cast<int64_t>(items.size()) * hkv;
  at::parallel_for(0, jobs, 1, [&](int64_t begin, int64_t end) {
    for (int64_t job = begin; job < end; ++job) {
      const int64_t item = job / hkv, h = job % hkv;
      switch (d) {
        case 16: attend_item<16>(a, items[item], item, h); break;
        case 32: attend_item<32>(a, items[item], item, h); break;
        case 64: attend_item<64>(a, items[item], item, h); break;
        default: attend_item<128>(a, items[item], item, h); break;
      }
    }
  });
}

// out [n, Hq, D]: the n new tokens of one sequence (q [n, Hq, D], last dim contiguous), token j attending
// to positions [0, start + j] in kcache, vcache [Hkv, blocks, block_size, D] through blocks (the sequence's
// block table, covering start + n positions).
void segment_attention(const at::Tensor& out, const at::Tensor& q, const at::Tensor& kcache,
                       const at::Tensor& vcache, const at::Tensor& blocks, int64_t start, double scale) {
  for (const at::Tensor* t : {&out, &q, &kcache, &vcache}) check(*t, "every float tensor", at::kFloat);
  check(blocks, "blocks", at::kLong);
  const int64_t n = q.size(0), hq = q.size(1), d = q.size(2), hkv = kcache.size(0);
  TORCH_CHECK(d == 16 || d == 32 || d == 64 || d == 128, "segment_attention: head_dim ", d,
              " is not 16, 32, 64 or 128");
  TORCH_CHECK(q.stride(2) == 1 && out.is_contiguous() && out.sizes() == q.sizes() && kcache.is_contiguous() &&
                  vcache.is_contiguous() && blocks.is_contiguous() && kcache.size(3) == d && hq % hkv == 0,
              "segment_attention: shapes or layouts do not match");
  SegmentArgs a{};
  a.hq = hq, a.g = hq / hkv, a.bs = kcache.size(2), a.start = start, a.nblocks = kcache.size(1);
  TORCH_CHECK(start >= 0 && n >= 1 && blocks.numel() * a.bs >= start + n,
              "segment_attention: the block table does not cover the segment");
  a.table = blocks.data_ptr<int64_t>();
  for (int64_t i = 0; i < (start + n + a.bs - 1) / a.bs; ++i)
    TORCH_CHECK(a.table[i] >= 0 && a.table[i] < a.nblocks, "segment_attention: block ", a.table[i], " out of range");
  a.q = q.data_ptr<float>(), a.qs0 = q.stride(0), a.qs1 = q.stride(1);
  a.out = out.data_ptr<float>(), a.kcache = kcache.data_ptr<float>(), a.vcache = vcache.data_ptr<float>();
  a.scale = static_cast<float>(scale);
  constexpr int64_t kTokens = 4;  // tokens per work item: their queries share each key read
  const int64_t parts = (n + kTokens - 1) / kTokens;
  at::parallel_for(0, hkv * parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t job = begin; job < end; ++job) {
      const int64_t h = job / parts, j0 = job % parts * kTokens, j1 = std::min(n, j0 + kTokens);
      switch (d) {
        case 16: attend_segment<16>(a, h, j0, j1); break;
        case 32: attend_segment<32>(a, h, j0, j1); break;
        case 64: attend_segment<64>(a, h, j0, j1); break;
        default: attend_segment<128>(a, h, j0, j1); break;
      }
    }
  });
}

TORCH_LIBRARY(temper, m) {
  m.def(
      "decode_attention(Tensor(a!) out, Tensor q, Tensor k, Tensor v, Tensor(b!) kbuf, Tensor(c!) vbuf, "
      "Tensor lengths, Tensor(d!) kcache, Tensor(e!) vcache, Tensor blocks, Tensor offsets, Tensor prefix_k, "
      "Tensor prefix_v, Tensor prefix_len, Tensor row_group, float scale) -> ()");
  m.def(
      "segment_attention(Tensor(a!) out, Tensor q, Tensor kcache, Tensor vcache, Tensor blocks, int start, "
      "float scale) -> ()");
}

TORCH_LIBRARY_IMPL(temper, CPU, m) {
  m.impl("decode_attention", &decode_attention);
  m.impl("segment_attention", &segment_attention);
}
