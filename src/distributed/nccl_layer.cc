// The MoE layer across ranks (include/fp4moe/distributed.h): a rank's MoeLayer between NCCL collectives.
// SPDX-License-Identifier: Apache-2.0
#include "fp4moe/distributed.h"

#include <string>
#include <utility>

#include "src/cuda/cuda_util.h"
#include "src/util/no_throw.h"
#include "src/moe/workspace.h"

namespace fp4moe {
namespace {

constexpr int64_t kAlign = detail::kWorkspaceAlign;  // the local layer's workspace starts on the same alignment
int64_t aligned(int64_t b) { return (b + kAlign - 1) / kAlign * kAlign; }

Status nccl_status(ncclResult_t r, ncclComm_t comm, const char* what) {
  if (r == ncclSuccess) return Status::ok();
  std::string msg = std::string("NCCL ") + what + ": " + ncclGetErrorString(r);
  if (comm != nullptr)
    if (const char* last = ncclGetLastError(comm); last != nullptr && *last) msg += " (" + std::string(last) + ")";
  return Status(r == ncclInvalidArgument || r == ncclInvalidUsage ? StatusCode::kInvalidArgument : StatusCode::kCudaError,
                msg);
}

#define FP4MOE_NCCL_TRY(call, comm, what) FP4MOE_RETURN_IF_ERROR(nccl_status((call), (comm), (what)))

}  // namespace

struct DistributedMoeLayer::Impl {
  ncclComm_t comm = nullptr;
  int rank = 0, world = 1, device = -1;
  DistributedMoeOptions d;
  MoeLayer layer;  // this rank's shard (layer.shape())

  // Tokens the local layer runs for a call of T tokens on this rank: all ranks' where they are sharded.
  int64_t all_tokens(int64_t T) const { return d.tokens == TokenLayout::kSharded ? T * world : T; }
  // Whether all_tokens(T) is representable (and so the byte counts from it, which the local layer bounds further):
  // T x world must not wrap where the tokens are sharded.
  bool tokens_ok(int64_t T) const { return T >= 0 && (d.tokens != TokenLayout::kSharded || T <= (int64_t{1} << 40) / world); }

  // kSharded: the gathered inputs and the whole output of the world x T tokens sit at the end of the workspace;
  // the local layer's workspace is everything before them (`local_bytes`).
  struct Layout {
    int64_t local_bytes, hidden, ids, weights, out, gathered;
  };
  Layout layout(int64_t tokens, int64_t bytes) const {
    Layout l{};
    const MoeShape& shape = layer.shape();
    const int64_t all = all_tokens(tokens);
    if (d.tokens == TokenLayout::kSharded)
      l.gathered = aligned(all * shape.hidden * 2) + 2 * aligned(all * shape.top_k * 4) + aligned(all * shape.hidden * 2);
    l.local_bytes = (bytes - l.gathered) / kAlign * kAlign;
    int64_t o = l.local_bytes;
    l.hidden = o, o += aligned(all * shape.hidden * 2);
    l.ids = o, o += aligned(all * shape.top_k * 4);
    l.weights = o, o += aligned(all * shape.top_k * 4);
    l.out = o;
    return l;
  }

  // What the local layer runs for `a` (this rank's T tokens): the gathered tokens where they are sharded.
  MoeForwardArgs local_args(const MoeForwardArgs& a, uint8_t* ws, const Layout& l) const {
    if (d.tokens == TokenLayout::kReplicated) return a;
    MoeForwardArgs g = a;
    g.num_tokens = all_tokens(a.num_tokens);
    g.hidden = ws + l.hidden;
    g.topk_ids = reinterpret_cast<const int32_t*>(ws + l.ids);
    g.topk_weights = reinterpret_cast<const float*>(ws + l.weights);
    g.output = ws + l.out;
    return g;
  }

  // Everything a call is rejected for, before anything is enqueued: what the local layer's run would reject too
  // (its plan and pointers, the workspace's size and alignment, the stream's device), so that no rank queues a
  // collective and then fails.
  Status check(const MoeForwardArgs& a, const void* workspace, size_t bytes, int current_device, cudaStream_t stream) const {
    if (current_device != device)
      return invalid_argument("the current device (" + std::to_string(current_device) + ") is not rank " +
                              std::to_string(rank) + "'s (" + std::to_string(device) + ")");
    if (!tokens_ok(a.num_tokens))
      return invalid_argument("num_tokens " + std::to_string(a.num_tokens) + " on " + std::to_string(world) +
                              " ranks: the gathered count must be in [0, 2^40]");
    // The call the local layer runs (the gathered T where tokens are sharded) with this rank's own pointers: its
    // plan (T, block_m, splits) and the pointers' rules; then its workspace, which that plan sizes.
    MoeForwardArgs g = a;
    g.num_tokens = all_tokens(a.num_tokens);
    FP4MOE_RETURN_IF_ERROR(layer.can_implement(g));
    if (a.num_tokens > 0) FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(workspace, kAlign, "workspace"));
    // The stream's device, which the local layer's run checks too: here only where the tokens are sharded, since
    // then the all-gathers are queued before that run (replicated tokens queue nothing before it).
    if (a.num_tokens > 0 && d.tokens == TokenLayout::kSharded)
      FP4MOE_RETURN_IF_ERROR(detail::check_stream_device(stream, device));
    const size_t need = layer.workspace_size(g);
    const Layout l = layout(a.num_tokens, static_cast<int64_t>(bytes));
    if (bytes < static_cast<size_t>(l.gathered) || static_cast<size_t>(l.local_bytes) < need)
      return Status(StatusCode::kResourceExhausted,
                    "workspace holds " + std::to_string(bytes) + " bytes; " + std::to_string(a.num_tokens) +
                        " tokens on " + std::to_string(world) + " ranks need " +
                        std::to_string(aligned(static_cast<int64_t>(need)) + l.gathered) + " (workspace_size)");
    return Status::ok();
  }

  Status dispatch(const MoeForwardArgs& a, uint8_t* ws, const Layout& l, cudaStream_t s) const {
    if (d.tokens != TokenLayout::kSharded) return Status::ok();
    const size_t T = static_cast<size_t>(a.num_tokens), H = static_cast<size_t>(layer.shape().hidden),
                 K = static_cast<size_t>(layer.shape().top_k);
    FP4MOE_NCCL_TRY(ncclAllGather(a.hidden, ws + l.hidden, T * H, ncclBfloat16, comm, s), comm, "all-gather of hidden states");
    FP4MOE_NCCL_TRY(ncclAllGather(a.topk_ids, ws + l.ids, T * K, ncclInt32, comm, s), comm, "all-gather of topk_ids");
    FP4MOE_NCCL_TRY(ncclAllGather(a.topk_weights, ws + l.weights, T * K, ncclFloat32, comm, s), comm,
                    "all-gather of topk_weights");
    return Status::ok();
  }

  Status combine(const MoeForwardArgs& a, uint8_t* ws, const Layout& l, cudaStream_t s) const {
    const size_t n = static_cast<size_t>(a.num_tokens * layer.shape().hidden);
    if (d.tokens == TokenLayout::kReplicated) {
      FP4MOE_NCCL_TRY(ncclAllReduce(a.output, a.output, n, ncclBfloat16, ncclSum, comm, s), comm, "all-reduce of the output");
    } else {
      FP4MOE_NCCL_TRY(ncclReduceScatter(ws + l.out, a.output, n, ncclBfloat16, ncclSum, comm, s), comm,
                      "reduce-scatter of the output");
    }
    return Status::ok();
  }
};

DistributedMoeLayer::DistributedMoeLayer() = default;
DistributedMoeLayer::~DistributedMoeLayer() = default;
DistributedMoeLayer::DistributedMoeLayer(DistributedMoeLayer&&) noexcept = default;
DistributedMoeLayer& DistributedMoeLayer::operator=(DistributedMoeLayer&&) noexcept = default;

Status DistributedMoeLayer::init(ncclComm_t comm, const MoeShape& local, const MoeLayerOptions& options,
                                 const DistributedMoeOptions& d, const Nvfp4ExpertWeights& w13,
                                 const Nvfp4ExpertWeights& w2, cudaStream_t stream) {
  return detail::no_throw([&]() -> Status {
    if (comm == nullptr) return invalid_argument("DistributedMoeLayer::init: comm is null");
    if (d.tokens != TokenLayout::kReplicated && d.tokens != TokenLayout::kSharded)
      return invalid_argument("DistributedMoeOptions::tokens is not a TokenLayout");
    auto impl = std::make_unique<Impl>();
    impl->comm = comm;
    impl->d = d;
    FP4MOE_NCCL_TRY(ncclCommCount(comm, &impl->world), comm, "comm count");
    FP4MOE_NCCL_TRY(ncclCommUserRank(comm, &impl->rank), comm, "comm rank");
    FP4MOE_NCCL_TRY(ncclCommCuDevice(comm, &impl->device), comm, "comm device");
    int current = -1;
    FP4MOE_CUDA_TRY(cudaGetDevice(&current));
    if (current != impl->device)
      return invalid_argument("the communicator's rank " + std::to_string(impl->rank) + " is on device " +
                              std::to_string(impl->device) + "; the current device is " + std::to_string(current));
    FP4MOE_RETURN_IF_ERROR(impl->layer.init(local, options, w13, w2, stream));
    impl_ = std::move(impl);
    return Status::ok();
  });
}

size_t DistributedMoeLayer::workspace_size(int64_t max_tokens) const {
  if (!impl_ || !impl_->tokens_ok(max_tokens)) return 0;
  const Impl& m = *impl_;
  const size_t local = m.layer.workspace_size(m.all_tokens(max_tokens));
  if (local == 0 && max_tokens > 0) return 0;  // (a step the local layer cannot take)
  const Impl::Layout l = m.layout(max_tokens, 0);
  return static_cast<size_t>(aligned(static_cast<int64_t>(local)) + l.gathered);
}

size_t DistributedMoeLayer::workspace_size(const MoeForwardArgs& a) const {
  if (!impl_ || !impl_->tokens_ok(a.num_tokens)) return 0;
  const Impl& m = *impl_;
  MoeForwardArgs g = a;
  g.num_tokens = m.all_tokens(a.num_tokens);
  const size_t local = m.layer.workspace_size(g);
  if (local == 0) return 0;
  return static_cast<size_t>(aligned(static_cast<int64_t>(local)) + m.layout(a.num_tokens, 0).gathered);
}

Status DistributedMoeLayer::run(const MoeForwardArgs& a, void* workspace, size_t bytes, cudaStream_t stream) const {
  return detail::no_throw([&]() -> Status {
    if (!impl_) return invalid_argument("DistributedMoeLayer is not initialised (call init first)");
    int current = -1;
    FP4MOE_CUDA_TRY(cudaGetDevice(&current));
    FP4MOE_RETURN_IF_ERROR(impl_->check(a, workspace, bytes, current, stream));
    if (a.num_tokens == 0) return Status::ok();
    auto* ws = static_cast<uint8_t*>(workspace);
    const Impl::Layout l = impl_->layout(a.num_tokens, static_cast<int64_t>(bytes));
    FP4MOE_RETURN_IF_ERROR(impl_->dispatch(a, ws, l, stream));
    const MoeForwardArgs g = impl_->local_args(a, ws, l);
    FP4MOE_RETURN_IF_ERROR(impl_->layer.run(g, ws, static_cast<size_t>(l.local_bytes), stream));
    return impl_->combine(a, ws, l, stream);
  });
}

Status DistributedMoeLayer::run_group(const std::vector<const DistributedMoeLayer*>& layers,
                                      const std::vector<MoeForwardArgs>& args, const std::vector<void*>& workspaces,
                                      const std::vector<size_t>& workspace_bytes, const std::vector<cudaStream_t>& streams) {
  return detail::no_throw([&]() -> Status {
    const size_t n = layers.size();
    if (n == 0 || args.size() != n || workspaces.size() != n || workspace_bytes.size() != n || streams.size() != n)
      return invalid_argument("run_group: layers, args, workspaces, workspace_bytes and streams must have one entry per rank");
    int saved = -1;
    FP4MOE_CUDA_TRY(cudaGetDevice(&saved));
    // Everything checked on every rank before any rank enqueues anything.
    Status bad;
    for (size_t i = 0; i < n && bad.is_ok(); ++i) {
      if (layers[i] == nullptr || !layers[i]->impl_) {
        bad = invalid_argument("run_group: rank entry " + std::to_string(i) + " is not an initialised layer");
        break;
      }
      if (args[i].num_tokens != args[0].num_tokens) {
        bad = invalid_argument("run_group: every rank must run the same T (" + std::to_string(args[0].num_tokens) +
                               " and " + std::to_string(args[i].num_tokens) + ")");
        break;
      }
      const cudaError_t e = cudaSetDevice(layers[i]->impl_->device);
      if (e != cudaSuccess) bad = Status(StatusCode::kCudaError, std::string("cudaSetDevice: ") + cudaGetErrorString(e));
      else bad = layers[i]->impl_->check(args[i], workspaces[i], workspace_bytes[i], layers[i]->impl_->device, streams[i]);
    }
    auto restore = [&](Status s) {
      cudaSetDevice(saved);
      return s;
    };
    if (!bad.is_ok() || args[0].num_tokens == 0) return restore(bad);
    // Phase by phase: a group's collectives start at ncclGroupEnd, so the kernels of a phase are enqueued between the
    // groups, in stream order after the dispatch and before the combine.
    std::vector<Impl::Layout> l(n);
    for (size_t i = 0; i < n; ++i) l[i] = layers[i]->impl_->layout(args[i].num_tokens, static_cast<int64_t>(workspace_bytes[i]));
    auto ws = [&](size_t i) { return static_cast<uint8_t*>(workspaces[i]); };
    auto grouped = [&](auto&& phase, const char* what) -> Status {
      if (const ncclResult_t r = ncclGroupStart(); r != ncclSuccess) return nccl_status(r, nullptr, what);
      Status st;
      for (size_t i = 0; i < n && st.is_ok(); ++i) st = phase(i);
      const ncclResult_t r = ncclGroupEnd();
      if (!st.is_ok()) return st;
      return nccl_status(r, nullptr, what);
    };
    Status st = grouped(
        [&](size_t i) {
          cudaSetDevice(layers[i]->impl_->device);
          return layers[i]->impl_->dispatch(args[i], ws(i), l[i], streams[i]);
        },
        "group of dispatches");
    for (size_t i = 0; i < n && st.is_ok(); ++i) {
      FP4MOE_CUDA_TRY(cudaSetDevice(layers[i]->impl_->device));
      const Impl& m = *layers[i]->impl_;
      st = m.layer.run(m.local_args(args[i], ws(i), l[i]), ws(i), static_cast<size_t>(l[i].local_bytes), streams[i]);
    }
    if (st.is_ok())
      st = grouped(
          [&](size_t i) {
            cudaSetDevice(layers[i]->impl_->device);
            return layers[i]->impl_->combine(args[i], ws(i), l[i], streams[i]);
          },
          "group of combines");
    return restore(st);
  });
}

int DistributedMoeLayer::rank() const { return impl_ ? impl_->rank : -1; }
int DistributedMoeLayer::world_size() const { return impl_ ? impl_->world : 0; }
int DistributedMoeLayer::device() const { return impl_ ? impl_->device : -1; }
const MoeLayer& DistributedMoeLayer::local() const {
  static const MoeLayer none;
  return impl_ ? impl_->layer : none;
}

}  // namespace fp4moe
