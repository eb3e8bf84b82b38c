// The MoE layer across tensor- or expert-parallel ranks: each rank's shard (MoeLayer) and NCCL collectives.
// SPDX-License-Identifier: Apache-2.0
//
// Link fp4moe::nccl (built where the toolkit has NCCL). One rank per GPU, either one process per GPU (run) or one
// process driving several GPUs (run_group). The shard is the caller's: tensor parallelism gives each rank
// MoeShape{E, H, I / tp, k} with weights from shard_tp_weights, expert parallelism MoeShape{E / ep, H, I, k,
// E, first} with weights from expert_range (fp4moe/shard.h). Either way a rank's MoeLayer writes its partial sum of
// every token, and the ranks' partial sums add up to the layer: the collectives below do that addition.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "fp4moe/moe.h"
#include "fp4moe/status.h"

namespace fp4moe {

// Where a step's tokens live.
enum class TokenLayout {
  // Every rank holds the same T tokens (tensor-parallel attention before the MoE): each rank computes its partial
  // sum of all T tokens and an all-reduce adds them, so every rank ends with the whole output.
  kReplicated,
  // Each rank holds T tokens of its own, the same T on every rank (data-parallel attention, sequence parallelism):
  // hidden states, ids and router weights are all-gathered (world x T tokens), each rank computes its partial sum
  // of all of them, and a reduce-scatter leaves each rank the whole output of its own T tokens.
  kSharded,
};

struct DistributedMoeOptions {
  TokenLayout tokens = TokenLayout::kReplicated;
};

// The reduction is NCCL's, in bf16 (each rank's bf16 partial sums; a ring step rounds each partial sum it adds to
// bf16). With a deterministic FinalizeMode (kDeterministic, kDeterministicBf16) and a fixed communicator, T and
// inputs, reruns are bit-identical as far as NCCL's own order is fixed for a given message size (it is for its ring
// and tree algorithms; NVLink multicast, NVLS, must stay off on the lent machines anyway).
class DistributedMoeLayer {
 public:
  DistributedMoeLayer();
  ~DistributedMoeLayer();
  DistributedMoeLayer(DistributedMoeLayer&&) noexcept;
  DistributedMoeLayer& operator=(DistributedMoeLayer&&) noexcept;

  // `comm`: an initialised communicator on the current device, of which this rank is a member (its size and rank
  // are read from it). `local`: this rank's shard and its weights. Not for the hot path (synchronises `stream`).
  Status init(ncclComm_t comm, const MoeShape& local, const MoeLayerOptions& options, const DistributedMoeOptions& d,
              const Nvfp4ExpertWeights& w13, const Nvfp4ExpertWeights& w2, cudaStream_t stream);
  // Workspace for up to `max_tokens` tokens on this rank (kSharded: the gathered world x T tokens' too).
  size_t workspace_size(int64_t max_tokens) const;
  // The workspace run(args) needs for exactly this call (0 where the local layer's plan rejects it).
  size_t workspace_size(const MoeForwardArgs& args) const;
  // This rank's forward pass: `args` are its T tokens (kReplicated: the same on every rank); args.output receives
  // the whole layer's output of those tokens. Enqueues kernels and collectives on `stream`; no allocation, no host
  // synchronisation (CUDA-graph capturable, NCCL collectives capture). Every rank must call it with the same T.
  // Bad arguments are rejected before anything is enqueued (no rank's buffers are written), but a rank that
  // rejects a call its peers accept leaves their collectives waiting: validate T across ranks first.
  Status run(const MoeForwardArgs& args, void* workspace, size_t workspace_bytes, cudaStream_t stream) const;
  // run() of several ranks driven by one thread (one GPU each, one communicator of ncclCommInitAll): the collectives
  // of all ranks in one NCCL group per phase. All vectors are indexed like `layers`.
  static Status run_group(const std::vector<const DistributedMoeLayer*>& layers, const std::vector<MoeForwardArgs>& args,
                          const std::vector<void*>& workspaces, const std::vector<size_t>& workspace_bytes,
                          const std::vector<cudaStream_t>& streams);

  int rank() const;
  int world_size() const;
  int device() const;
  // This rank's shard (plan(), check(), describe()); its workspace is the start of run()'s `workspace`.
  const MoeLayer& local() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fp4moe
