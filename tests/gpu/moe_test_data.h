// Random MoE test problems: weights generated on the GPU from a counter-based hash (the host reference
// regenerates the rows it needs), activations, routing (uniform, skewed, one expert, with bad ids).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fp4moe/moe.h"
#include "moe_reference.h"
#include "random_data.h"
#include "hash_rng.h"
#include "random_fill.cuh"
#include "tests/gpu/gpu_test_util.h"

namespace fp4moe::testing {

enum class Routing { kUniform, kSkewed, kOneExpert, kWithBadIds };

inline const char* routing_name(Routing r) {
  switch (r) {
    case Routing::kUniform: return "uniform";
    case Routing::kSkewed: return "skewed";
    case Routing::kOneExpert: return "one-expert";
    case Routing::kWithBadIds: return "bad-ids";
  }
  return "?";
}

// Expert weights [E, N, K] in the checkpoint layout on the device, and a host view of the same numbers.
struct ExpertWeights {
  int64_t E = 0, N = 0, K = 0;
  uint64_t seed = 0;
  DeviceBuffer packed, scales, global;
  std::vector<float> host_global;
  bool dequant_kind = false;  // global holds g = 1/gs (ModelOpt weight_scale_2)

  bool make(int64_t e, int64_t n, int64_t k, uint64_t s, bool dequant) {
    E = e, N = n, K = k, seed = s, dequant_kind = dequant;
    packed.alloc(static_cast<size_t>(E * N * K / 2));
    scales.alloc(static_cast<size_t>(E * N * K / 16));
    global.alloc(static_cast<size_t>(E * 4));
    const int64_t nb = E * N * K / 2, ns = E * N * K / 16;
    devdata::fill_random_bytes_kernel<><<<static_cast<unsigned>((nb + 255) / 256), 256>>>(packed.as<uint8_t>(), nb, seed, false);
    devdata::fill_random_bytes_kernel<><<<static_cast<unsigned>((ns + 255) / 256), 256>>>(scales.as<uint8_t>(), ns, seed + 1, true);
    std::mt19937_64 rng(seed + 2);
    std::uniform_real_distribution<float> d(200.0f, 3000.0f);
    host_global.resize(static_cast<size_t>(E));
    for (auto& g : host_global) g = dequant ? 1.0f / d(rng) : d(rng);
    return cudaGetLastError() == cudaSuccess && global.upload(host_global) && cudaDeviceSynchronize() == cudaSuccess;
  }
  Nvfp4ExpertWeights device() const { return {packed.get(), scales.get(), global.as<float>()}; }
  reference::ExpertWeightsView view() const {
    reference::ExpertWeightsView v;
    v.num_experts = E, v.rows = N, v.k = K;
    const int64_t n = N, k = K;
    const uint64_t s = seed;
    v.row_bytes = [=](int64_t e, int64_t row, uint8_t* packed, uint8_t* scales) {
      const uint64_t p0 = static_cast<uint64_t>((e * n + row) * (k / 2)), s0 = static_cast<uint64_t>((e * n + row) * (k / 16));
      for (int64_t b = 0; b < k / 2; ++b) packed[b] = devdata::random_packed_byte(s, p0 + static_cast<uint64_t>(b));
      for (int64_t b = 0; b < k / 16; ++b) scales[b] = devdata::random_block_scale(s + 1, s0 + static_cast<uint64_t>(b));
    };
    const std::vector<float> g = host_global;
    const bool dq = dequant_kind;
    v.global_scale = [g, dq](int64_t e) { return dq ? 1.0 / static_cast<double>(g[static_cast<size_t>(e)]) : g[static_cast<size_t>(e)]; };
    return v;
  }
};

// Token-side inputs: bf16 hidden states, top-k ids (distinct per token) and positive router weights.
struct RoutingInputs {
  std::vector<uint16_t> hidden;
  std::vector<int32_t> ids;
  std::vector<float> weights;

  void make(int64_t T, int64_t H, int64_t E, int64_t k, Routing routing, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    hidden.resize(static_cast<size_t>(T * H));
    for (auto& h : hidden) h = float_to_bf16(nd(rng));
    ids.resize(static_cast<size_t>(T * k));
    weights.resize(static_cast<size_t>(T * k));
    std::uniform_int_distribution<int32_t> any(0, static_cast<int32_t>(E - 1));
    std::uniform_real_distribution<float> u(0.05f, 1.0f), coin(0.0f, 1.0f);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int32_t> chosen;
      while (static_cast<int64_t>(chosen.size()) < k) {
        int32_t e = any(rng);
        if (routing == Routing::kSkewed && coin(rng) < 0.8f) e = static_cast<int32_t>(rng() % std::min<int64_t>(4, E));
        if (routing == Routing::kOneExpert && chosen.empty()) e = 0;
        bool dup = false;
        for (int32_t c : chosen) dup |= c == e;
        if (!dup) chosen.push_back(e);
      }
      float sum = 0;
      for (int64_t s = 0; s < k; ++s) {
        ids[static_cast<size_t>(t * k + s)] = chosen[static_cast<size_t>(s)];
        sum += weights[static_cast<size_t>(t * k + s)] = u(rng);
      }
      for (int64_t s = 0; s < k; ++s) weights[static_cast<size_t>(t * k + s)] /= sum;
    }
    if (routing == Routing::kWithBadIds && T * k >= 3) {
      ids[0] = static_cast<int32_t>(E);  // out of range
      ids[static_cast<size_t>(T * k / 2)] = -1;
    }
  }
};

}  // namespace fp4moe::testing
