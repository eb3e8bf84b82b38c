// Benchmark of the NVFP4 MoE layer (GLM-5 shape by default) against the weight-bytes floor and a cuBLAS
// bf16 batched GEMM on the same active experts, all measured in the same run.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fp4moe/moe.h"
#include "tests/common/random_fill.cuh"
#include "tools/bench_util.h"
#include "tools/cublas_loader.h"

using namespace fp4moe;

namespace {

struct Row {
  int64_t T;
  int active;
  double weight_mb, route_us, gate_up_us, down_us, layer_us, floor_us, gbs, pct_bw, tflops, cublas_us, cublas_gate_up_us;
  int block_m, heuristic_bm;
};

void fill(void* p, int64_t n, uint64_t seed, bool scales) {
  testing::fill_random_bytes_kernel<><<<static_cast<unsigned>((n + 255) / 256), 256>>>(static_cast<uint8_t*>(p), n, seed, scales);
  BENCH_CUDA(cudaGetLastError());
}

}  // namespace

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("bench_moe: no CUDA device, nothing to time\n");
    return 0;
  }
  std::vector<int64_t> Ts = {1, 8, 64, 256, 512, 1024, 2048, 4096};
  if (argc > 1) {
    Ts.clear();
    for (char* s = argv[1]; *s;) {
      Ts.push_back(std::strtoll(s, &s, 10));
      if (*s == ',') ++s;
    }
  }
  const MoeShape shape{256, 6144, 2048, 8};  // GLM-5
  const int64_t E = shape.num_experts, H = shape.hidden, I = shape.intermediate, K = shape.top_k;
  const bench::DeviceInfo dev = bench::device_info();
  bench::print_device_header(dev);
  const double read_gbs = bench::read_bandwidth_gbs(size_t{4} << 30);
  const double copy_gbs = bench::copy_bandwidth_gbs(size_t{2} << 30);
  bench::Cublas cublas;
  const bool have_cublas = cublas.load();
  double cublas_peak = 0;
  if (have_cublas) {
    const int m = 8192;
    void *b, *c;
    BENCH_CUDA(cudaMalloc(&b, size_t(m) * m * 2));
    BENCH_CUDA(cudaMalloc(&c, size_t(m) * m * 2));
    BENCH_CUDA(cudaMemset(b, 0x3C, size_t(m) * m * 2));  // 0x3C3C = 0.0115: finite, not zero
    const float one = 1, zero = 0;
    const bench::Timing t = bench::time_events(
        [&](int) {
          cublas.gemm_ex(cublas.handle, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, b, CUDA_R_16BF, m, b, CUDA_R_16BF, m,
                         &zero, c, CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        },
        3, 10);
    cublas_peak = 2.0 * m * m * double(m) / (t.median_us * 1e-6) / 1e12;
    BENCH_CUDA(cudaFree(b));
    BENCH_CUDA(cudaFree(c));
  }
  std::printf("measured: read %.0f GB/s (streaming read kernel, 4 GiB), copy %.0f GB/s (read+write), cuBLAS bf16 "
              "8192^3 %.0f TFLOP/s%s\n",
              read_gbs, copy_gbs, cublas_peak, have_cublas ? "" : (" (cuBLAS unavailable: " + cublas.error + ")").c_str());

  // Weights: random NVFP4 codes and scales, checkpoint layout, then prepacked by the layer.
  void *w13p, *w13s, *w2p, *w2s, *g13, *g2;
  BENCH_CUDA(cudaMalloc(&w13p, E * 2 * I * H / 2));
  BENCH_CUDA(cudaMalloc(&w13s, E * 2 * I * H / 16));
  BENCH_CUDA(cudaMalloc(&w2p, E * H * I / 2));
  BENCH_CUDA(cudaMalloc(&w2s, E * H * I / 16));
  BENCH_CUDA(cudaMalloc(&g13, E * 4));
  BENCH_CUDA(cudaMalloc(&g2, E * 4));
  fill(w13p, E * 2 * I * H / 2, 1, false);
  fill(w13s, E * 2 * I * H / 16, 2, true);
  fill(w2p, E * H * I / 2, 3, false);
  fill(w2s, E * H * I / 16, 4, true);
  std::vector<float> gs(static_cast<size_t>(E), 1000.0f);
  BENCH_CUDA(cudaMemcpy(g13, gs.data(), E * 4, cudaMemcpyHostToDevice));
  BENCH_CUDA(cudaMemcpy(g2, gs.data(), E * 4, cudaMemcpyHostToDevice));
  MoeLayer layer;
  Status st = layer.init(shape, MoeLayerOptions{}, {w13p, w13s, static_cast<float*>(g13)},
                         {w2p, w2s, static_cast<float*>(g2)}, nullptr);
  if (!st.is_ok()) {
    std::fprintf(stderr, "init: %s\n", st.to_string().c_str());
    return 1;
  }
  BENCH_CUDA(cudaFree(w13p));
  BENCH_CUDA(cudaFree(w13s));
  BENCH_CUDA(cudaFree(w2p));
  BENCH_CUDA(cudaFree(w2s));

  // cuBLAS baseline buffers: bf16 weights for all experts (w13 and w2), activations, outputs.
  void *cw13 = nullptr, *cw2 = nullptr, *cx = nullptr, *cy = nullptr, *ca = nullptr, *cz = nullptr;
  if (have_cublas) {
    BENCH_CUDA(cudaMalloc(&cw13, size_t(E) * 2 * I * H * 2));
    BENCH_CUDA(cudaMalloc(&cw2, size_t(E) * H * I * 2));
    BENCH_CUDA(cudaMemset(cw13, 0x3C, size_t(E) * 2 * I * H * 2));
    BENCH_CUDA(cudaMemset(cw2, 0x3C, size_t(E) * H * I * 2));
  }

  const double bytes_per_expert = (2.0 * I * H + double(H) * I) * 0.5625;
  std::vector<Row> rows;
  for (int64_t T : Ts) {
    // Routing sets rotated between iterations so the active experts' weights are not L2-resident.
    const int sets = T <= 64 ? 16 : 4;
    const size_t ws_bytes = layer.workspace_size(T);
    std::vector<void*> ws(sets), ids(sets), wts(sets);
    void *hid, *out;
    BENCH_CUDA(cudaMalloc(&hid, T * H * 2));
    BENCH_CUDA(cudaMalloc(&out, T * H * 2));
    BENCH_CUDA(cudaMemset(hid, 0x3C, T * H * 2));
    std::mt19937_64 rng(T);
    double active_sum = 0;
    int max_per_expert = 0;
    for (int s = 0; s < sets; ++s) {
      std::vector<int32_t> hid_ids(static_cast<size_t>(T * K));
      std::vector<float> hw(static_cast<size_t>(T * K), 1.0f / K);
      std::vector<int> cnt(static_cast<size_t>(E), 0);
      for (int64_t t = 0; t < T; ++t) {
        std::set<int32_t> chosen;
        while (static_cast<int64_t>(chosen.size()) < K) chosen.insert(static_cast<int32_t>(rng() % E));
        int j = 0;
        for (int32_t e : chosen) {
          hid_ids[static_cast<size_t>(t * K + j++)] = e;
          ++cnt[static_cast<size_t>(e)];
        }
      }
      for (int c : cnt) {
        active_sum += c > 0;
        max_per_expert = std::max(max_per_expert, c);
      }
      BENCH_CUDA(cudaMalloc(&ws[s], ws_bytes));
      BENCH_CUDA(cudaMalloc(&ids[s], T * K * 4));
      BENCH_CUDA(cudaMalloc(&wts[s], T * K * 4));
      BENCH_CUDA(cudaMemcpy(ids[s], hid_ids.data(), T * K * 4, cudaMemcpyHostToDevice));
      BENCH_CUDA(cudaMemcpy(wts[s], hw.data(), T * K * 4, cudaMemcpyHostToDevice));
    }
    const double active = active_sum / sets;
    int bm_override = 0;
    auto args = [&](int i) {
      MoeForwardArgs a;
      a.block_m = bm_override;
      a.hidden = hid;
      a.num_tokens = T;
      a.topk_ids = static_cast<int32_t*>(ids[i % sets]);
      a.topk_weights = static_cast<float*>(wts[i % sets]);
      a.output = out;
      return a;
    };
    auto phase = [&](unsigned ph) {
      // Routing for every set first, so a phase timed alone finds its tables in the workspace.
      for (int s = 0; s < sets; ++s) {
        const Status r = layer.run(args(s), ws[s], ws_bytes, nullptr, kPhaseRouting);
        if (!r.is_ok()) std::fprintf(stderr, "routing: %s\n", r.to_string().c_str());
      }
      return bench::time_events(
          [&](int i) {
            const Status r = layer.run(args(i), ws[i % sets], ws_bytes, nullptr, ph);
            if (!r.is_ok()) {
              std::fprintf(stderr, "%s\n", r.to_string().c_str());
              std::abort();
            }
          },
          sets, std::max(20, 2 * sets));
    };
    Row r{};
    r.T = T;
    r.active = static_cast<int>(active + 0.5);
    // Every built-in block_m: the fastest whole layer is reported (the tuner's job, done inline here).
    r.layer_us = 1e30;
    std::string tried;
    const char* only_bm = std::getenv("FP4MOE_BENCH_BLOCK_M");  // profile one config
    for (int bm : kernel_block_ms()) {
      if (only_bm && std::atoi(only_bm) != bm) continue;
      bm_override = bm;
      const double us = phase(kPhaseAll).median_us;
      char buf[48];
      std::snprintf(buf, sizeof(buf), "%sbm%d %.0f", tried.empty() ? "" : ", ", bm, us);
      tried += buf;
      if (us < r.layer_us) {
        r.layer_us = us;
        r.block_m = bm;
      }
    }
    bm_override = r.block_m;
    r.route_us = phase(kPhaseRouting).median_us;
    r.gate_up_us = phase(kPhaseGateUp).median_us;
    r.down_us = phase(kPhaseDown).median_us;
    r.heuristic_bm = layer.block_m_for(T);
    const Status chk = layer.check(ws[0], nullptr);
    if (!chk.is_ok()) std::fprintf(stderr, "check: %s\n", chk.to_string().c_str());
    r.weight_mb = active * bytes_per_expert / 1e6;
    r.floor_us = active * bytes_per_expert / (read_gbs * 1e3);
    r.gbs = active * bytes_per_expert / (r.layer_us * 1e3);
    r.pct_bw = 100.0 * r.gbs / read_gbs;
    r.tflops = 2.0 * T * K * (3.0 * I * H) / (r.layer_us * 1e-6) / 1e12;
    if (have_cublas) {
      // Dense bf16 equivalent: each active expert multiplies its mean token count through w13 and w2.
      const int na = std::max(1, r.active);
      const int m = static_cast<int>((T * K + na - 1) / na);
      BENCH_CUDA(cudaMalloc(&cx, size_t(na) * m * H * 2));
      BENCH_CUDA(cudaMalloc(&cy, size_t(na) * m * 2 * I * 2));
      BENCH_CUDA(cudaMalloc(&ca, size_t(na) * m * I * 2));
      BENCH_CUDA(cudaMalloc(&cz, size_t(na) * m * H * 2));
      BENCH_CUDA(cudaMemset(cx, 0x3C, size_t(na) * m * H * 2));
      BENCH_CUDA(cudaMemset(ca, 0x3C, size_t(na) * m * I * 2));
      const float one = 1, zero = 0;
      // Rotate over which experts are used when fewer than all are active (start offset), to leave L2 cold.
      auto check = [](cublasStatus_t st) {
        if (st != CUBLAS_STATUS_SUCCESS) {
          std::fprintf(stderr, "cuBLAS error %d\n", static_cast<int>(st));
          std::abort();
        }
      };
      const bench::Timing tg = bench::time_events(
          [&](int i) {
            const int64_t off = (static_cast<int64_t>(i) * na) % (E - na + 1);
            check(cublas.gemm_strided_batched_ex(cublas.handle, CUBLAS_OP_T, CUBLAS_OP_N, 2 * I, m, H, &one,
                                                 static_cast<char*>(cw13) + off * 2 * I * H * 2, CUDA_R_16BF, H,
                                                 2 * I * H, cx, CUDA_R_16BF, H, int64_t(m) * H, &zero, cy, CUDA_R_16BF,
                                                 2 * I, int64_t(m) * 2 * I, na, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
          },
          3, 20);
      const bench::Timing td = bench::time_events(
          [&](int i) {
            const int64_t off = (static_cast<int64_t>(i) * na) % (E - na + 1);
            check(cublas.gemm_strided_batched_ex(cublas.handle, CUBLAS_OP_T, CUBLAS_OP_N, H, m, I, &one,
                                                 static_cast<char*>(cw2) + off * H * I * 2, CUDA_R_16BF, I, H * I, ca,
                                                 CUDA_R_16BF, I, int64_t(m) * I, &zero, cz, CUDA_R_16BF, H,
                                                 int64_t(m) * H, na, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
          },
          3, 20);
      r.cublas_gate_up_us = tg.median_us;
      r.cublas_us = tg.median_us + td.median_us;
      BENCH_CUDA(cudaFree(cx));
      BENCH_CUDA(cudaFree(cy));
      BENCH_CUDA(cudaFree(ca));
      BENCH_CUDA(cudaFree(cz));
    }
    rows.push_back(r);
    for (int s = 0; s < sets; ++s) {
      BENCH_CUDA(cudaFree(ws[s]));
      BENCH_CUDA(cudaFree(ids[s]));
      BENCH_CUDA(cudaFree(wts[s]));
    }
    BENCH_CUDA(cudaFree(hid));
    BENCH_CUDA(cudaFree(out));
    std::printf("  T=%lld: max tokens on one expert %d; layer us by block_m: %s (heuristic picks %d)\n",
                static_cast<long long>(T), max_per_expert, tried.c_str(), r.heuristic_bm);
    std::fflush(stdout);
  }

  std::printf("\nGLM-5 MoE layer (E=256, H=6144, I=2048, top-8), NVFP4 W4A16, deterministic finalize; weights rotated "
              "past L2; median of >= 20 after warm-up\n");
  std::printf("bytes = active experts' NVFP4 weights incl. scales (0.5625 B/weight); floor = bytes / measured read BW\n\n");
  std::printf("%6s %6s %3s %8s %7s %8s %8s %8s %8s %6s %6s %7s %9s %7s %9s %7s\n", "T", "active", "bm", "MB", "route",
              "gate_up", "down", "layer", "floor", "GB/s", "%BW", "TFLOP/s", "cuBLAS gu", "gu x", "cuBLAS", "layer x");
  for (const Row& r : rows)
    std::printf("%6lld %6d %3d %8.1f %7.1f %8.1f %8.1f %8.1f %8.1f %6.0f %5.1f%% %7.1f %9.1f %6.2fx %9.1f %6.2fx\n",
                static_cast<long long>(r.T), r.active, r.block_m, r.weight_mb, r.route_us, r.gate_up_us, r.down_us,
                r.layer_us, r.floor_us, r.gbs, r.pct_bw, r.tflops, r.cublas_gate_up_us,
                r.cublas_gate_up_us > 0 ? r.cublas_gate_up_us / r.gate_up_us : 0.0, r.cublas_us,
                r.cublas_us > 0 ? r.cublas_us / r.layer_us : 0.0);
  std::printf("(times in us; route/gate_up/down timed alone; layer = all phases in one run; cuBLAS = bf16\n"
              " cublasGemmStridedBatchedEx over the active experts at their mean token count: gate_up, and gate_up + down;\n"
              " gu x = cuBLAS gate_up / fp4moe gate_up, layer x = cuBLAS gate_up + down / fp4moe layer)\n");
  if (cw13) BENCH_CUDA(cudaFree(cw13));
  if (cw2) BENCH_CUDA(cudaFree(cw2));
  return 0;
}
