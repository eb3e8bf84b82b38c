// Probe: the write bandwidth of the down GEMM's fp32 partial sums as laid out today (row-major [pairs, H]: an item
// of 64 rows x one 256-column N tile writes 64 runs of 1 KB, 24 KB apart) against tile-major ([H/256][pairs][256]:
// the same item writes one run of 64 KB), and the finalize-like read of each; TP8 T=16384 sizes (131,072 pairs,
// H = 6144: 3.2 GB). Persistent blocks take items in the GEMM's orders. Not part of the library.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

constexpr int kRows = 64, kTileCols = 256, kThreads = 256;

// layout 0: row-major; 1: tile-major. order 0: item = chunk * tiles + nt (N tile inner); 1: item = nt * chunks + chunk.
__global__ void write_items(float* __restrict__ buf, long long pairs, int H, int layout, int order, float v) {
  const int tiles = H / kTileCols;
  const long long chunks = pairs / kRows, items = chunks * tiles;
  for (long long it = blockIdx.x; it < items; it += gridDim.x) {
    const long long chunk = order == 0 ? it / tiles : it % chunks;
    const int nt = order == 0 ? static_cast<int>(it % tiles) : static_cast<int>(it / chunks);
    // each thread: 64 rows x 256 cols / 256 threads = 64 floats, as 16 float4 stores
    for (int i = threadIdx.x; i < kRows * kTileCols / 4; i += kThreads) {
      const int row = i / (kTileCols / 4), c4 = i % (kTileCols / 4);
      const long long r = chunk * kRows + row;
      float4* d = layout == 0
                      ? reinterpret_cast<float4*>(buf + r * H + static_cast<long long>(nt) * kTileCols) + c4
                      : reinterpret_cast<float4*>(buf + (static_cast<long long>(nt) * pairs + r) * kTileCols) + c4;
      *d = make_float4(v, v + row, v + c4, v);
    }
  }
}

// The finalize's read: token t sums its 8 rows r = perm[t * 8 + s] (random), 16 B a thread.
__global__ void read_terms(const float* __restrict__ buf, const int* __restrict__ perm, long long tokens, int H,
                           int layout, long long pairs, float* __restrict__ out) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long groups = H / 4;
  if (idx >= tokens * groups) return;
  const long long t = idx / groups, c = (idx % groups) * 4;
  float4 s = make_float4(0, 0, 0, 0);
  float4 v[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const long long r = perm[t * 8 + k];
    const float* p = layout == 0 ? buf + r * H + c : buf + ((c / kTileCols) * pairs + r) * kTileCols + c % kTileCols;
    v[k] = __ldcs(reinterpret_cast<const float4*>(p));
  }
#pragma unroll
  for (int k = 0; k < 8; ++k) { s.x += v[k].x; s.y += v[k].y; s.z += v[k].z; s.w += v[k].w; }
  out[idx] = s.x + s.y + s.z + s.w;
}

int main() {
  const long long tokens = 16384, pairs = tokens * 8;
  const int H = 6144;
  const size_t bytes = static_cast<size_t>(pairs) * H * 4;
  float *buf = nullptr, *out = nullptr;
  int* perm = nullptr;
  CK(cudaMalloc(&buf, bytes));
  CK(cudaMalloc(&out, static_cast<size_t>(tokens) * (H / 4) * 4));
  CK(cudaMalloc(&perm, static_cast<size_t>(pairs) * 4));
  std::vector<int> hp(static_cast<size_t>(pairs));
  for (long long i = 0; i < pairs; ++i) hp[static_cast<size_t>(i)] = static_cast<int>(i);
  unsigned s = 12345;
  for (long long i = pairs - 1; i > 0; --i) {  // a random permutation (the routing's rows of a token's pairs)
    s = s * 1664525u + 1013904223u;
    std::swap(hp[static_cast<size_t>(i)], hp[static_cast<size_t>(s % static_cast<unsigned>(i + 1))]);
  }
  CK(cudaMemcpy(perm, hp.data(), hp.size() * 4, cudaMemcpyHostToDevice));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  auto time = [&](auto&& f) {
    std::vector<float> ms;
    for (int i = 0; i < 7; ++i) {
      cudaEventRecord(a);
      f();
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float x = 0;
      cudaEventElapsedTime(&x, a, b);
      ms.push_back(x);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  const double gb = static_cast<double>(bytes) / 1e9;
  float m = time([&] { cudaMemsetAsync(buf, 0, bytes); });
  std::printf("cudaMemset of %.2f GB: %.3f ms, %.0f GB/s\n", gb, m, gb / m * 1e3);
  for (int blocks_per_sm : {1, 2, 4})
    for (int layout : {0, 1})
      for (int order : {0, 1}) {
        m = time([&] { write_items<<<sms * blocks_per_sm, kThreads>>>(buf, pairs, H, layout, order, 1.0f); });
        std::printf("write %s, items %s, %d blocks/SM: %.3f ms, %.0f GB/s\n", layout ? "tile-major" : "row-major ",
                    order ? "chunk inner " : "N tile inner", blocks_per_sm, m, gb / m * 1e3);
      }
  for (int layout : {0, 1}) {
    const long long n = tokens * (H / 4);
    m = time([&] { read_terms<<<static_cast<unsigned>((n + 255) / 256), 256>>>(buf, perm, tokens, H, layout, pairs, out); });
    std::printf("finalize-like read %s: %.3f ms, %.0f GB/s\n", layout ? "tile-major" : "row-major ", m, gb / m * 1e3);
  }
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  return 0;
}
