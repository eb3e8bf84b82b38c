// Benchmark of the MoE layer across the GPUs of one machine over NCCL: TP and EP layers with their communication,
// the shard alone, the collectives alone for the same bytes, and one GPU's unsharded layer, in one run.
// SPDX-License-Identifier: Apache-2.0
//
// fp4moe_bench_nccl [--gpus N] [--mode tp|ep|both] [--tokens 1 8 64 512] [--iters 20] [--model glm5]
// One process drives N GPUs (ncclCommInitAll). TP: tokens replicated, outputs all-reduced. EP: tokens sharded,
// hidden states / ids / weights all-gathered and outputs reduce-scattered (T is then tokens per rank; the table
// counts the world's tokens). Weights: random NVFP4, 4 routing sets rotated so the active experts' weights are not
// L2-resident. Times: CUDA events on every rank's stream around one step, the slowest rank, median of --iters.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "fp4moe/distributed.h"
#include "fp4moe/moe.h"
#include "fp4moe/planner.h"
#include "fp4moe/shard.h"
#include "random_fill.cuh"

namespace fp4moe::bench {
namespace {

#define NCCL_TRY(x)                                                                                            \
  do {                                                                                                         \
    ncclResult_t r_ = (x);                                                                                     \
    if (r_ != ncclSuccess)                                                                                     \
      return Status(StatusCode::kCudaError, std::string(#x) + " failed: " + ncclGetErrorString(r_));            \
  } while (0)

struct Buf {
  void* p = nullptr;
  int dev = 0;
  ~Buf() {
    if (p) {
      cudaSetDevice(dev);
      cudaFree(p);
    }
  }
  Status alloc(int d, size_t bytes) {
    dev = d;
    BENCH_TRY(cudaSetDevice(d));
    BENCH_TRY(cudaMalloc(&p, bytes ? bytes : 16));
    return Status::ok();
  }
};

Status random_weights(int dev, const MoeShape& s, uint64_t seed, std::vector<Buf>* keep, Nvfp4ExpertWeights* w13,
                      Nvfp4ExpertWeights* w2) {
  const int64_t E = s.num_experts, H = s.hidden, I = s.intermediate;
  const int64_t sz[6] = {E * 2 * I * H / 2, E * 2 * I * H / 16, E * 4, E * H * I / 2, E * H * I / 16, E * 4};
  keep->resize(6);
  for (int i = 0; i < 6; ++i) {
    FP4MOE_RETURN_IF_ERROR((*keep)[static_cast<size_t>(i)].alloc(dev, static_cast<size_t>(sz[i])));
    if (i == 2 || i == 5) {
      const std::vector<float> g(static_cast<size_t>(E), 1000.0f);
      BENCH_TRY(cudaMemcpy((*keep)[static_cast<size_t>(i)].p, g.data(), static_cast<size_t>(E * 4), cudaMemcpyHostToDevice));
    } else {
      const int64_t n = sz[i];
      devdata::fill_random_bytes_kernel<><<<static_cast<unsigned>((n + 255) / 256), 256>>>(
          static_cast<uint8_t*>((*keep)[static_cast<size_t>(i)].p), n, seed + static_cast<uint64_t>(i), i == 1 || i == 4);
      BENCH_TRY(cudaGetLastError());
    }
  }
  auto& k = *keep;
  *w13 = {k[0].p, k[1].p, static_cast<float*>(k[2].p)};
  *w2 = {k[3].p, k[4].p, static_cast<float*>(k[5].p)};
  BENCH_TRY(cudaDeviceSynchronize());
  return Status::ok();
}

// k distinct ids of [0, E) per token.
std::vector<int32_t> routing(int64_t T, int64_t E, int64_t k, std::mt19937_64& rng) {
  std::vector<int32_t> ids;
  std::vector<int32_t> pool(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    for (int32_t e = 0; e < E; ++e) pool[static_cast<size_t>(e)] = e;
    for (int64_t j = 0; j < k; ++j) {
      std::uniform_int_distribution<int64_t> d(j, E - 1);
      std::swap(pool[static_cast<size_t>(j)], pool[static_cast<size_t>(d(rng))]);
      ids.push_back(pool[static_cast<size_t>(j)]);
    }
  }
  return ids;
}

// Median over iters of the slowest rank's event time of fn (which enqueues one step on every rank's stream).
Status time_ranks(int n, const std::vector<cudaStream_t>& streams, int iters, const std::function<Status(int)>& fn,
                  double* us) {
  std::vector<cudaEvent_t> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    BENCH_TRY(cudaSetDevice(i));
    BENCH_TRY(cudaEventCreate(&a[static_cast<size_t>(i)]));
    BENCH_TRY(cudaEventCreate(&b[static_cast<size_t>(i)]));
  }
  std::vector<double> t;
  for (int it = -3; it < iters; ++it) {
    for (int i = 0; i < n; ++i) {
      BENCH_TRY(cudaSetDevice(i));
      BENCH_TRY(cudaDeviceSynchronize());
      BENCH_TRY(cudaEventRecord(a[static_cast<size_t>(i)], streams[static_cast<size_t>(i)]));
    }
    FP4MOE_RETURN_IF_ERROR(fn(it < 0 ? 0 : it));
    double worst = 0;
    for (int i = 0; i < n; ++i) {
      BENCH_TRY(cudaSetDevice(i));
      BENCH_TRY(cudaEventRecord(b[static_cast<size_t>(i)], streams[static_cast<size_t>(i)]));
    }
    for (int i = 0; i < n; ++i) {
      BENCH_TRY(cudaSetDevice(i));
      BENCH_TRY(cudaEventSynchronize(b[static_cast<size_t>(i)]));
      float ms = 0;
      BENCH_TRY(cudaEventElapsedTime(&ms, a[static_cast<size_t>(i)], b[static_cast<size_t>(i)]));
      worst = std::max(worst, static_cast<double>(ms) * 1000.0);
    }
    if (it >= 0) t.push_back(worst);
  }
  for (int i = 0; i < n; ++i) {
    cudaSetDevice(i);
    cudaEventDestroy(a[static_cast<size_t>(i)]);
    cudaEventDestroy(b[static_cast<size_t>(i)]);
  }
  *us = median_of(std::move(t));
  return Status::ok();
}

struct Options {
  int gpus = 0;
  std::string mode = "both";
  std::vector<int64_t> tokens = {1, 8, 64, 512};
  int iters = 20;
  std::string model = "glm5";
};

Status run(const Options& o) {
  int have = 0;
  BENCH_TRY(cudaGetDeviceCount(&have));
  const int n = o.gpus > 0 ? o.gpus : have;
  if (n < 1 || n > have)
    return invalid_argument("--gpus " + std::to_string(n) + ": this machine has " + std::to_string(have) + " GPUs");
  const ModelPreset* m = nullptr;
  FP4MOE_RETURN_IF_ERROR(find_model(o.model, &m));
  const MoeShape full = m->shape;
  std::printf("%s on %d GPU(s); NCCL %d.%d.%d; NCCL_NVLS_ENABLE=%s\n", m->name, n, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
              std::getenv("NCCL_NVLS_ENABLE") ? std::getenv("NCCL_NVLS_ENABLE") : "(unset)");
  print_device_header(device_info());
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  std::vector<int> devs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) devs[static_cast<size_t>(i)] = i;
  NCCL_TRY(ncclCommInitAll(comms.data(), n, devs.data()));
  std::vector<cudaStream_t> streams(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    BENCH_TRY(cudaSetDevice(i));
    BENCH_TRY(cudaStreamCreateWithFlags(&streams[static_cast<size_t>(i)], cudaStreamNonBlocking));
  }
  MoeLayerOptions lo;
  lo.tuning_cache = "none";
  // One GPU's unsharded layer (GPU 0), the scaling baseline.
  std::vector<Buf> wfull;
  Nvfp4ExpertWeights f13, f2;
  FP4MOE_RETURN_IF_ERROR(random_weights(0, full, 1, &wfull, &f13, &f2));
  BENCH_TRY(cudaSetDevice(0));
  MoeLayer unsharded;
  FP4MOE_RETURN_IF_ERROR(unsharded.init(full, lo, f13, f2, nullptr));

  for (const char* mode_name : {"tp", "ep"}) {
    const std::string mode = mode_name;
    if (o.mode != "both" && o.mode != mode) continue;
    const bool tp = mode == "tp";
    MoeShape probe;
    if (const Status s = shard_shape(full, tp ? n : 1, tp ? 1 : n, 0, &probe); !s.is_ok()) {
      std::printf("\n%s\n", s.message().c_str());  // (this shape does not split that way: the other mode may)
      continue;
    }
    const DistributedMoeOptions d{tp ? TokenLayout::kReplicated : TokenLayout::kSharded};
    std::vector<std::vector<Buf>> wk(static_cast<size_t>(n));
    std::vector<DistributedMoeLayer> layers(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      MoeShape local;
      FP4MOE_RETURN_IF_ERROR(shard_shape(full, tp ? n : 1, tp ? 1 : n, tp ? 0 : i, &local));
      Nvfp4ExpertWeights w13, w2;
      FP4MOE_RETURN_IF_ERROR(random_weights(i, local, 100 + static_cast<uint64_t>(i) * 10, &wk[static_cast<size_t>(i)], &w13, &w2));
      BENCH_TRY(cudaSetDevice(i));
      FP4MOE_RETURN_IF_ERROR(layers[static_cast<size_t>(i)].init(comms[static_cast<size_t>(i)], local, lo, d, w13, w2, nullptr));
    }
    std::printf("\n%s%d (%s): T = tokens of the step (EP: all ranks' tokens, T / %d per rank); us, slowest rank, median of %d\n",
                mode.c_str(), n, tp ? "tokens replicated, bf16 all-reduce" : "tokens sharded, all-gather + bf16 reduce-scatter",
                n, o.iters);
    std::printf("%8s %10s %10s %12s %12s %8s %12s %9s %10s\n", "T", "shard", "comm", "layer+comm", "shard+comm", "ratio",
                "1-GPU layer", "speedup", "comm GB/s");
    for (int64_t Tstep : o.tokens) {
      const int64_t T = tp ? Tstep : std::max<int64_t>(1, Tstep / n);  // per rank
      const int64_t Tall = tp ? T : T * n;
      constexpr int kSets = 4;
      std::mt19937_64 rng(static_cast<uint64_t>(Tstep));
      // Per rank and routing set: inputs, output, workspace.
      struct Rank {
        Buf hidden, out, ws, local_out, local_ws, comm_in, comm_out, all_hidden;
        std::vector<Buf> ids, wts, all_ids, all_wts;  // all_*: the world's tokens (EP's gathered inputs)
        size_t ws_bytes = 0, local_ws_bytes = 0;
      };
      std::vector<Rank> rk(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {
        Rank& r = rk[static_cast<size_t>(i)];
        const DistributedMoeLayer& L = layers[static_cast<size_t>(i)];
        FP4MOE_RETURN_IF_ERROR(r.hidden.alloc(i, static_cast<size_t>(T * full.hidden * 2)));
        BENCH_TRY(cudaMemset(r.hidden.p, 0x3C, static_cast<size_t>(T * full.hidden * 2)));
        FP4MOE_RETURN_IF_ERROR(r.out.alloc(i, static_cast<size_t>(T * full.hidden * 2)));
        r.ws_bytes = L.workspace_size(T);  // (sized once: workspace_size is not for the timed loop)
        r.local_ws_bytes = L.local().workspace_size(Tall);
        FP4MOE_RETURN_IF_ERROR(r.ws.alloc(i, r.ws_bytes));
        FP4MOE_RETURN_IF_ERROR(r.local_out.alloc(i, static_cast<size_t>(Tall * full.hidden * 2)));
        FP4MOE_RETURN_IF_ERROR(r.local_ws.alloc(i, r.local_ws_bytes));
        FP4MOE_RETURN_IF_ERROR(r.comm_in.alloc(i, static_cast<size_t>(Tall * full.hidden * 2)));
        FP4MOE_RETURN_IF_ERROR(r.comm_out.alloc(i, static_cast<size_t>(Tall * full.hidden * 2)));
        r.ids.resize(kSets);
        r.wts.resize(kSets);
        r.all_ids.resize(kSets);
        r.all_wts.resize(kSets);
        FP4MOE_RETURN_IF_ERROR(r.all_hidden.alloc(i, static_cast<size_t>(Tall * full.hidden * 2)));
        BENCH_TRY(cudaMemset(r.all_hidden.p, 0x3C, static_cast<size_t>(Tall * full.hidden * 2)));
      }
      for (int s = 0; s < kSets; ++s) {
        // TP: every rank the same ids (replicated tokens); EP: each rank its own tokens' ids, and the world's
        // (rank-major, as the all-gather orders them) for the shard timed alone.
        std::vector<std::vector<int32_t>> ids(static_cast<size_t>(n));
        std::vector<int32_t> all;
        for (int i = 0; i < n; ++i) {
          std::mt19937_64 rs(tp ? static_cast<uint64_t>(Tstep * 31 + s) : rng());
          ids[static_cast<size_t>(i)] = routing(T, full.num_experts, full.top_k, rs);
          all.insert(all.end(), ids[static_cast<size_t>(i)].begin(), ids[static_cast<size_t>(i)].end());
        }
        for (int i = 0; i < n; ++i) {
          Rank& r = rk[static_cast<size_t>(i)];
          const std::vector<int32_t>& mine = ids[static_cast<size_t>(i)];
          const std::vector<int32_t>& every = tp ? mine : all;
          const std::vector<float> w(every.size(), 1.0f / static_cast<float>(full.top_k));
          FP4MOE_RETURN_IF_ERROR(r.ids[static_cast<size_t>(s)].alloc(i, mine.size() * 4));
          FP4MOE_RETURN_IF_ERROR(r.wts[static_cast<size_t>(s)].alloc(i, mine.size() * 4));
          FP4MOE_RETURN_IF_ERROR(r.all_ids[static_cast<size_t>(s)].alloc(i, every.size() * 4));
          FP4MOE_RETURN_IF_ERROR(r.all_wts[static_cast<size_t>(s)].alloc(i, every.size() * 4));
          BENCH_TRY(cudaMemcpy(r.ids[static_cast<size_t>(s)].p, mine.data(), mine.size() * 4, cudaMemcpyHostToDevice));
          BENCH_TRY(cudaMemcpy(r.wts[static_cast<size_t>(s)].p, w.data(), mine.size() * 4, cudaMemcpyHostToDevice));
          BENCH_TRY(cudaMemcpy(r.all_ids[static_cast<size_t>(s)].p, every.data(), every.size() * 4, cudaMemcpyHostToDevice));
          BENCH_TRY(cudaMemcpy(r.all_wts[static_cast<size_t>(s)].p, w.data(), every.size() * 4, cudaMemcpyHostToDevice));
        }
      }
      auto args = [&](int i, int it) {
        Rank& r = rk[static_cast<size_t>(i)];
        MoeForwardArgs a;
        a.hidden = r.hidden.p;
        a.num_tokens = T;
        a.topk_ids = static_cast<const int32_t*>(r.ids[static_cast<size_t>(it % kSets)].p);
        a.topk_weights = static_cast<const float*>(r.wts[static_cast<size_t>(it % kSets)].p);
        a.output = r.out.p;
        return a;
      };
      // 1. layer + communication.
      double t_layer = 0;
      FP4MOE_RETURN_IF_ERROR(time_ranks(n, streams, o.iters, [&](int it) -> Status {
        std::vector<const DistributedMoeLayer*> lp;
        std::vector<MoeForwardArgs> as;
        std::vector<void*> ws;
        std::vector<size_t> wb;
        for (int i = 0; i < n; ++i) {
          lp.push_back(&layers[static_cast<size_t>(i)]);
          as.push_back(args(i, it));
          ws.push_back(rk[static_cast<size_t>(i)].ws.p);
          wb.push_back(rk[static_cast<size_t>(i)].ws_bytes);
        }
        return DistributedMoeLayer::run_group(lp, as, ws, wb, streams);
      }, &t_layer));
      // 2. the shard alone on the tokens it computes (EP: the world's), inputs from the rotated sets.
      double t_shard = 0;
      FP4MOE_RETURN_IF_ERROR(time_ranks(n, streams, o.iters, [&](int it) -> Status {
        for (int i = 0; i < n; ++i) {
          BENCH_TRY(cudaSetDevice(i));
          Rank& r = rk[static_cast<size_t>(i)];
          MoeForwardArgs a;
          a.hidden = tp ? r.hidden.p : r.all_hidden.p;
          a.num_tokens = Tall;
          a.topk_ids = static_cast<const int32_t*>(r.all_ids[static_cast<size_t>(it % kSets)].p);
          a.topk_weights = static_cast<const float*>(r.all_wts[static_cast<size_t>(it % kSets)].p);
          a.output = r.local_out.p;
          const MoeLayer& l = layers[static_cast<size_t>(i)].local();
          FP4MOE_RETURN_IF_ERROR(l.run(a, r.local_ws.p, r.local_ws_bytes, streams[static_cast<size_t>(i)]));
        }
        return Status::ok();
      }, &t_shard));
      // 3. the collectives alone, same bytes.
      double t_comm = 0;
      FP4MOE_RETURN_IF_ERROR(time_ranks(n, streams, o.iters, [&](int) -> Status {
        NCCL_TRY(ncclGroupStart());
        for (int i = 0; i < n; ++i) {
          Rank& r = rk[static_cast<size_t>(i)];
          const size_t elems = static_cast<size_t>(T * full.hidden);
          if (tp) {
            NCCL_TRY(ncclAllReduce(r.comm_in.p, r.comm_out.p, elems, ncclBfloat16, ncclSum, comms[static_cast<size_t>(i)],
                                   streams[static_cast<size_t>(i)]));
          } else {
            NCCL_TRY(ncclAllGather(r.hidden.p, r.comm_in.p, elems, ncclBfloat16, comms[static_cast<size_t>(i)],
                                   streams[static_cast<size_t>(i)]));
          }
        }
        NCCL_TRY(ncclGroupEnd());
        if (!tp) {
          NCCL_TRY(ncclGroupStart());
          for (int i = 0; i < n; ++i) {
            Rank& r = rk[static_cast<size_t>(i)];
            NCCL_TRY(ncclReduceScatter(r.comm_in.p, r.comm_out.p, static_cast<size_t>(T * full.hidden), ncclBfloat16,
                                       ncclSum, comms[static_cast<size_t>(i)], streams[static_cast<size_t>(i)]));
          }
          NCCL_TRY(ncclGroupEnd());
        }
        return Status::ok();
      }, &t_comm));
      // 4. one GPU's unsharded layer on the step's tokens.
      BENCH_TRY(cudaSetDevice(0));
      Buf uh, uo, uws, uid;
      FP4MOE_RETURN_IF_ERROR(uh.alloc(0, static_cast<size_t>(Tall * full.hidden * 2)));
      BENCH_TRY(cudaMemset(uh.p, 0x3C, static_cast<size_t>(Tall * full.hidden * 2)));
      FP4MOE_RETURN_IF_ERROR(uo.alloc(0, static_cast<size_t>(Tall * full.hidden * 2)));
      const size_t uws_bytes = unsharded.workspace_size(Tall);
      FP4MOE_RETURN_IF_ERROR(uws.alloc(0, uws_bytes));
      std::mt19937_64 ru(static_cast<uint64_t>(Tstep) + 7);
      const std::vector<int32_t> uids = routing(Tall, full.num_experts, full.top_k, ru);
      const std::vector<float> uw(uids.size(), 1.0f / static_cast<float>(full.top_k));
      Buf uwt;
      FP4MOE_RETURN_IF_ERROR(uid.alloc(0, uids.size() * 4));
      FP4MOE_RETURN_IF_ERROR(uwt.alloc(0, uw.size() * 4));
      BENCH_TRY(cudaMemcpy(uid.p, uids.data(), uids.size() * 4, cudaMemcpyHostToDevice));
      BENCH_TRY(cudaMemcpy(uwt.p, uw.data(), uw.size() * 4, cudaMemcpyHostToDevice));
      MoeForwardArgs ua;
      ua.hidden = uh.p;
      ua.num_tokens = Tall;
      ua.topk_ids = static_cast<const int32_t*>(uid.p);
      ua.topk_weights = static_cast<const float*>(uwt.p);
      ua.output = uo.p;
      Status ust;
      const Timing tu = time_events(
          [&](int) {
            const Status st = unsharded.run(ua, uws.p, uws_bytes, streams[0]);
            if (!st.is_ok()) ust = st;
          },
          3,
                                    o.iters, streams[0]);
      FP4MOE_RETURN_IF_ERROR(ust);
      const double bytes = tp ? 2.0 * (n - 1) / n * static_cast<double>(T * full.hidden * 2)  // ring all-reduce bus bytes
                              : 2.0 * (n - 1) / n * static_cast<double>(Tall * full.hidden * 2);
      std::printf("%8lld %10.1f %10.1f %12.1f %12.1f %7.2fx %12.1f %8.2fx %10.1f\n", static_cast<long long>(Tall), t_shard,
                  t_comm, t_layer, t_shard + t_comm, t_layer / (t_shard + t_comm), tu.median_us, tu.median_us / t_layer,
                  bytes / (t_comm * 1e-6) / 1e9);
    }
  }
  std::printf("(ratio = layer+comm / (shard alone + collectives alone), the issue's target <= 1.3; comm GB/s = NCCL bus "
              "bandwidth of the collectives alone: 2(n-1)/n x the message bytes)\n");
  for (int i = 0; i < n; ++i) {
    cudaSetDevice(i);
    cudaStreamDestroy(streams[static_cast<size_t>(i)]);
    ncclCommDestroy(comms[static_cast<size_t>(i)]);
  }
  return Status::ok();
}

}  // namespace
}  // namespace fp4moe::bench

int main(int argc, char** argv) {
  fp4moe::bench::Options o;
  CLI::App app{"MoE layer over NCCL on the GPUs of this machine: TP and EP layers with communication"};
  app.add_option("--gpus", o.gpus, "GPUs (ranks); default all")->check(CLI::Range(1, 64));
  app.add_option("--mode", o.mode, "tp, ep or both")->check(CLI::IsMember({"tp", "ep", "both"}));
  app.add_option("--tokens", o.tokens, "tokens per step")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--iters", o.iters, "timed steps (median)")->check(CLI::Range(5, 1000));
  app.add_option("--model", o.model, "model preset");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  const fp4moe::Status s = fp4moe::bench::run(o);
  if (!s.is_ok()) {
    std::fprintf(stderr, "error: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}
