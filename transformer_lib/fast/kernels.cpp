// The compiled CPU kernels of transformer_lib.fast (see kernels.py, which builds and loads
// them with torch.utils.cpp_extension.load_inline): dropout, the feed-forward layer's
// bias + ReLU + dropout, and attention.
#include <torch/extension.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <cmath>
#include <cstring>
#include <vector>

// MKL's batched matrix multiply, which PyTorch's x86 Linux builds carry and export. A weak
// reference: where it is missing, attention_kernel_available() says so and the library
// uses PyTorch's own attention kernel.
#if defined(__linux__)
extern "C" void cblas_sgemm_batch(int layout, const int* transa, const int* transb,
                                  const int* m, const int* n, const int* k, const float* alpha,
                                  const float** a, const int* lda, const float** b,
                                  const int* ldb, const float* beta, float** c, const int* ldc,
                                  int group_count, const int* group_size) __attribute__((weak));
bool batched_gemm_linked() { return cblas_sgemm_batch != nullptr; }
#else
bool batched_gemm_linked() { return false; }
#endif

namespace {

constexpr int64_t kBlock = 1024;              // elements per block: 256 random 64-bit words

// The w-th, w-th + 1, ... outputs of SplitMix64 started at `key`.
void random_words(uint64_t* words, uint64_t key, uint64_t first, int64_t count) {
  for (int64_t j = 0; j < count; ++j) {
    uint64_t z = key + (first + j + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    words[j] = z ^ (z >> 31);
  }
}

// Calls body(start, len, bits) for consecutive blocks of up to kBlock elements of n, on
// every thread: bits[k] holds the 16 random bits of element start + k, top bit flipped, so
// that bits[k] >= threshold exactly when the 16 bits read as a signed integer are at least
// threshold - 2^15 (the test of transformer_lib.dropout.keep_mask).
template <typename Body>
void for_each_block(int64_t n, uint64_t key, const Body& body) {
  at::parallel_for(0, (n + kBlock - 1) / kBlock, 16, [&](int64_t begin, int64_t end) {
    alignas(64) uint64_t words[kBlock / 4];
    const uint16_t* bits = reinterpret_cast<const uint16_t*>(words);  // 4 per word
    for (int64_t block = begin; block < end; ++block) {
      const int64_t start = block * kBlock;
      const int64_t len = std::min(kBlock, n - start);
      const int64_t count = (len + 3) / 4;
      random_words(words, key, static_cast<uint64_t>(start / 4), count);
      for (int64_t j = 0; j < count; ++j) words[j] ^= 0x8000800080008000ULL;
      body(start, len, bits);
    }
  });
}

// out[i] = x[i] * scale where element i is kept, else 0; with_relu: max(that, 0).
template <typename T, bool with_relu>
void masked(const T* x_ptr, T* out_ptr, int64_t n, uint32_t threshold, float scale_arg,
            uint64_t key) {
  using acc_t = at::opmath_type<T>;
  const acc_t scale = static_cast<acc_t>(scale_arg);
  for_each_block(n, key, [=](int64_t start, int64_t len, const uint16_t* __restrict__ bits) {
    // Local restrict pointers and local copies (not the closure's members): the compiler
    // then knows the stores to `out` change nothing else, and vectorises the loop.
    const T* __restrict__ x = x_ptr + start;
    T* __restrict__ out = out_ptr + start;
    const uint32_t t = threshold;
    const acc_t s = scale;
    for (int64_t k = 0; k < len; ++k) {
      acc_t v = bits[k] >= t ? static_cast<acc_t>(x[k]) * s : acc_t(0);
      if (with_relu) v = std::max(v, acc_t(0));
      out[k] = static_cast<T>(v);
    }
  });
}

// In place: h[r, c] = ReLU((h[r, c] + bias[c]) * scale) where element r * cols + c is kept,
// else 0 (the feed-forward layer's bias, ReLU and dropout in one pass). Row by row within a
// block, so that the inner loop runs along the bias and vectorises.
template <typename T>
void bias_relu_masked(T* h_ptr, const T* bias_ptr, int64_t n, int64_t cols, uint32_t threshold,
                      float scale_arg, uint64_t key) {
  using acc_t = at::opmath_type<T>;
  const acc_t scale = static_cast<acc_t>(scale_arg);
  for_each_block(n, key, [=](int64_t start, int64_t len, const uint16_t* __restrict__ bits) {
    const uint32_t t = threshold;                                     // locals, as in masked
    const acc_t s = scale;
    for (int64_t k = 0; k < len;) {
      const int64_t col = (start + k) % cols;
      const int64_t run_len = std::min(len - k, cols - col);        // to the end of the row
      T* __restrict__ h = h_ptr + start + k;
      const T* __restrict__ bias = bias_ptr + col;
      const uint16_t* __restrict__ b = bits + k;
      for (int64_t j = 0; j < run_len; ++j) {
        const acc_t v = (static_cast<acc_t>(h[j]) + static_cast<acc_t>(bias[j])) * s;
        h[j] = static_cast<T>(b[j] >= t ? std::max(v, acc_t(0)) : acc_t(0));
      }
      k += run_len;
    }
  });
}

void check_threshold(int64_t threshold) {
  TORCH_CHECK(threshold >= 0 && threshold <= 65536,
              "compiled dropout: threshold must be in [0, 65536], got ", threshold);
}

template <bool with_relu>
torch::Tensor run(const torch::Tensor& input, int64_t threshold, double scale, int64_t key) {
  TORCH_CHECK(input.device().is_cpu(), "compiled dropout: expected a CPU tensor, got ",
              input.device());
  check_threshold(threshold);
  const torch::Tensor x = input.contiguous();
  torch::Tensor out = torch::empty_like(x, at::MemoryFormat::Contiguous);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "dropout", [&] {
    masked<scalar_t, with_relu>(x.const_data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
                                x.numel(), static_cast<uint32_t>(threshold),
                                static_cast<float>(scale), static_cast<uint64_t>(key));
  });
  return out;
}

}  // namespace

torch::Tensor dropout(const torch::Tensor& x, int64_t threshold, double scale, int64_t key) {
  return run<false>(x, threshold, scale, key);
}

torch::Tensor relu_dropout(const torch::Tensor& x, int64_t threshold, double scale,
                           int64_t key) {
  return run<true>(x, threshold, scale, key);
}

// In place on h (rows x bias.numel(), contiguous): Dropout(ReLU(h + bias)); returns h.
torch::Tensor bias_relu_dropout_(torch::Tensor h, const torch::Tensor& bias, int64_t threshold,
                                 double scale, int64_t key) {
  TORCH_CHECK(h.device().is_cpu() && h.is_contiguous() && bias.is_contiguous() &&
              bias.dim() == 1 && h.size(-1) == bias.numel() && h.dtype() == bias.dtype(),
              "bias_relu_dropout_: expected a contiguous CPU h of shape (..., n) and a bias of "
              "shape (n,) in the same dtype, got ", h.sizes(), " and ", bias.sizes());
  check_threshold(threshold);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, h.scalar_type(), "dropout", [&] {
    bias_relu_masked<scalar_t>(h.data_ptr<scalar_t>(), bias.const_data_ptr<scalar_t>(),
                               h.numel(), bias.numel(), static_cast<uint32_t>(threshold),
                               static_cast<float>(scale), static_cast<uint64_t>(key));
  });
  return h;
}

// In place on grad: grad * scale where y > 0, else 0 (backward of a ReLU + dropout whose
// output is y); returns grad.
torch::Tensor relu_dropout_backward_(torch::Tensor grad, const torch::Tensor& y, double scale) {
  TORCH_CHECK(grad.device().is_cpu() && grad.is_contiguous() && y.is_contiguous() &&
              grad.sizes() == y.sizes() && grad.dtype() == y.dtype(),
              "relu_dropout_backward_: expected contiguous CPU tensors of one shape and dtype");
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, grad.scalar_type(), "dropout", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    scalar_t* g_ptr = grad.data_ptr<scalar_t>();
    const scalar_t* y_ptr = y.const_data_ptr<scalar_t>();
    const acc_t s = static_cast<acc_t>(scale);
    at::parallel_for(0, grad.numel(), 16384, [=](int64_t begin, int64_t end) {
      scalar_t* __restrict__ g = g_ptr + begin;
      const scalar_t* __restrict__ out = y_ptr + begin;
      for (int64_t i = 0; i < end - begin; ++i) {
        const acc_t v = static_cast<acc_t>(g[i]) * s;     // computed for every i: vectorises
        g[i] = static_cast<scalar_t>(static_cast<acc_t>(out[i]) > acc_t(0) ? v : acc_t(0));
      }
    });
  });
  return grad;
}

// ---- attention: softmax(Q K^T * scale, masked) V for every batch row and head ----

namespace {

// One group of row-major products of the same shape: C_i = alpha op(A_i) op(B_i), each
// matrix addressed by its first element and its row stride, so that a head's queries, keys
// and values are read in place from the (B, L, D) projections, without copies.
struct Products {
  std::vector<const float*> a, b;
  std::vector<float*> c;
  void add(const float* a_i, const float* b_i, float* c_i) {
    a.push_back(a_i);
    b.push_back(b_i);
    c.push_back(c_i);
  }
  void run(bool trans_a, bool trans_b, int m, int n, int k, float alpha, int64_t lda,
           int64_t ldb, int64_t ldc) {
#if defined(__linux__)
    const int ta = trans_a ? 112 : 111, tb = trans_b ? 112 : 111;    // CblasTrans, NoTrans
    const int la = static_cast<int>(lda), lb = static_cast<int>(ldb),
              lc = static_cast<int>(ldc), size = static_cast<int>(c.size());
    const float beta = 0.0f;
    cblas_sgemm_batch(101, &ta, &tb, &m, &n, &k, &alpha, a.data(), &la, b.data(), &lb,  // row-major
                      &beta, c.data(), &lc, 1, &size);
#endif
  }
};

// exp(x) for x <= 0 (scores minus their row maximum): 2^n * e^r with |r| <= ln(2) / 2 and
// e^r by its Taylor polynomial; relative error ~1e-7. Below -87 it returns 0, not a
// subnormal number (they make the matrix multiplies that follow many times slower).
inline float exp_nonpositive(float x_in) {
  const float x = std::max(x_in, -87.0f);
  const float round = 12582912.0f;                  // 1.5 * 2^23: adding it rounds to integer
  const float n = (x * 1.44269504088896341f + round) - round;        // x / ln 2, rounded
  const float r = x - n * 0.693147180559945309f;
  float e = 1.0f / 5040;
  e = e * r + 1.0f / 720;
  e = e * r + 1.0f / 120;
  e = e * r + 1.0f / 24;
  e = e * r + 1.0f / 6;
  e = e * r + 0.5f;
  e = e * r + 1.0f;
  e = e * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;            // 2^n
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return x_in < -87.0f ? 0.0f : e * two_n;
}

void check_rows(const torch::Tensor& x, const char* name, int64_t B, int64_t D) {
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == at::kFloat && x.dim() == 3 &&
              x.size(0) == B && x.size(2) == D && x.stride(2) == 1,
              "attention kernel: ", name, " must be a float32 CPU tensor of shape (", B,
              ", L, ", D, ") with unit stride along D, got ", x.scalar_type(), " ", x.sizes(),
              " strides ", x.strides());
}

}  // namespace

bool attention_kernel_available() { return batched_gemm_linked(); }

// q: (B, T, D); k, v: (B, S, D); row strides free, unit stride along D (so they may be
// slices of one projection's output). mask: bool, (B, H, T, S) after expand (any strides),
// True = may attend; or None. Returns (out (B, T, D) with the heads side by side, weights
// (B, H, T, S)). A query row with nothing to attend to gets weights 0 and output 0.
std::vector<torch::Tensor> attention_forward(const torch::Tensor& q, const torch::Tensor& k,
                                             const torch::Tensor& v,
                                             const c10::optional<torch::Tensor>& mask,
                                             int64_t heads, double scale) {
  TORCH_CHECK(attention_kernel_available(), "attention kernel: MKL's cblas_sgemm_batch is "
              "not linked in this PyTorch build");
  const int64_t B = q.size(0), T = q.size(1), D = q.size(2), S = k.size(1), H = heads;
  TORCH_CHECK(H > 0 && D % H == 0, "attention kernel: heads must divide D");
  check_rows(q, "q", B, D);
  check_rows(k, "k", B, D);
  check_rows(v, "v", B, D);
  TORCH_CHECK(v.size(1) == S, "attention kernel: k and v must have the same length");
  const bool masked = mask.has_value() && mask->defined();
  if (masked)
    TORCH_CHECK(mask->scalar_type() == at::kBool && mask->dim() == 4 && mask->size(0) == B &&
                mask->size(1) == H && mask->size(2) == T && mask->size(3) == S,
                "attention kernel: mask must be bool of shape (B, H, T, S), got ",
                mask->sizes());
  const int64_t dk = D / H;
  torch::Tensor out = torch::empty({B, T, D}, q.options());
  torch::Tensor weights = torch::empty({B, H, T, S}, q.options());
  float* w = weights.data_ptr<float>();
  Products scores, mix;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      float* w_bh = w + (b * H + h) * T * S;
      scores.add(q.const_data_ptr<float>() + b * q.stride(0) + h * dk,
                 k.const_data_ptr<float>() + b * k.stride(0) + h * dk, w_bh);
      mix.add(w_bh, v.const_data_ptr<float>() + b * v.stride(0) + h * dk,
              out.data_ptr<float>() + b * T * D + h * dk);
    }
  scores.run(false, true, T, S, dk, static_cast<float>(scale), q.stride(1), k.stride(1), S);
  const bool* m = masked ? mask->const_data_ptr<bool>() : nullptr;
  const int64_t mb = masked ? mask->stride(0) : 0, mh = masked ? mask->stride(1) : 0,
                mt = masked ? mask->stride(2) : 0, ms = masked ? mask->stride(3) : 0;
  at::parallel_for(0, B * H * T, 64, [&](int64_t begin, int64_t end) {     // softmax rows
    for (int64_t row = begin; row < end; ++row) {
      float* __restrict__ x = w + row * S;
      if (masked) {
        const int64_t t = row % T, h = (row / T) % H, b = row / (T * H);
        const bool* __restrict__ m_row = m + b * mb + h * mh + t * mt;
        if (ms == 1) {
#pragma omp simd
          for (int64_t s = 0; s < S; ++s) x[s] = m_row[s] ? x[s] : -INFINITY;
        } else {
          for (int64_t s = 0; s < S; ++s) x[s] = m_row[s * ms] ? x[s] : -INFINITY;
        }
      }
      // (`omp simd` lets the compiler vectorise the max and the sum, in any order.)
      float top = -INFINITY;
#pragma omp simd reduction(max : top)
      for (int64_t s = 0; s < S; ++s) top = std::max(top, x[s]);
      if (top == -INFINITY) {                               // nothing to attend to: zeros
        for (int64_t s = 0; s < S; ++s) x[s] = 0.0f;
        continue;
      }
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t s = 0; s < S; ++s) {
        x[s] = exp_nonpositive(x[s] - top);
        sum += x[s];
      }
      const float inv = 1.0f / sum;
#pragma omp simd
      for (int64_t s = 0; s < S; ++s) x[s] *= inv;
    }
  });
  mix.run(false, false, T, dk, S, 1.0f, S, v.stride(1), D);
  return {out, weights};
}

// The backward pass of attention_forward: from grad (B, T, D) and the forward's weights,
// writes the gradients of q, k and v into grad_q, grad_k, grad_v (same shapes and layout
// rules as q, k, v; they may be slices of one buffer).
void attention_backward(const torch::Tensor& grad, const torch::Tensor& q,
                        const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& weights, double scale, torch::Tensor grad_q,
                        torch::Tensor grad_k, torch::Tensor grad_v) {
  const int64_t B = q.size(0), T = q.size(1), D = q.size(2), S = k.size(1);
  const int64_t H = weights.size(1), dk = D / H;
  check_rows(grad, "grad", B, D);
  check_rows(q, "q", B, D);
  check_rows(grad_q, "grad_q", B, D);
  check_rows(k, "k", B, D);
  check_rows(v, "v", B, D);
  check_rows(grad_k, "grad_k", B, D);
  check_rows(grad_v, "grad_v", B, D);
  TORCH_CHECK(weights.is_contiguous() && weights.size(2) == T && weights.size(3) == S,
              "attention kernel: weights must be the forward's (B, H, T, S) output");
  const float* w = weights.const_data_ptr<float>();
  torch::Tensor grad_scores = torch::empty_like(weights);            // dL/d(scores)
  float* gs = grad_scores.data_ptr<float>();
  Products to_weights, to_v, to_q, to_k;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t bh = b * H + h;
      const float* g = grad.const_data_ptr<float>() + b * grad.stride(0) + h * dk;
      to_weights.add(g, v.const_data_ptr<float>() + b * v.stride(0) + h * dk, gs + bh * T * S);
      to_v.add(w + bh * T * S, g, grad_v.data_ptr<float>() + b * grad_v.stride(0) + h * dk);
      to_q.add(gs + bh * T * S, k.const_data_ptr<float>() + b * k.stride(0) + h * dk,
               grad_q.data_ptr<float>() + b * grad_q.stride(0) + h * dk);
      to_k.add(gs + bh * T * S, q.const_data_ptr<float>() + b * q.stride(0) + h * dk,
               grad_k.data_ptr<float>() + b * grad_k.stride(0) + h * dk);
    }
  to_weights.run(false, true, T, S, dk, 1.0f, grad.stride(1), v.stride(1), S);  // dL/dW = G V^T
  at::parallel_for(0, B * H * T, 64, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {    // through the softmax: W * (dW - <W, dW>)
      const float* __restrict__ p = w + row * S;
      float* __restrict__ x = gs + row * S;
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int64_t s = 0; s < S; ++s) dot += p[s] * x[s];
#pragma omp simd
      for (int64_t s = 0; s < S; ++s) x[s] = p[s] * (x[s] - dot);
    }
  });
  const float sc = static_cast<float>(scale);
  to_v.run(true, false, S, dk, T, 1.0f, S, grad.stride(1), grad_v.stride(1));     // W^T G
  to_q.run(false, false, T, dk, S, sc, S, k.stride(1), grad_q.stride(1));         // dS K
  to_k.run(true, false, S, dk, T, sc, S, q.stride(1), grad_k.stride(1));          // dS^T Q
}
