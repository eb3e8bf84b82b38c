// Thin wrappers over the PTX instructions the GEMM kernels use (cp.async and its bulk form, ldmatrix, mma.sync, prmt,
// lop3, mbarrier, griddepcontrol), each with the reason it is used and its PTX ISA section.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

namespace fp4moe::kernels::ptx {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global->shared copy that bypasses L1 (`.cg`: weights are read once) and runs asynchronously,
// so several pipeline stages are in flight while the warps compute. `src_bytes` = 0 writes 16 zero bytes
// (used for the unused token rows of a tile). PTX ISA "cp.async":
// https://docs.nvidia.com/cuda/parallel-thread-execution/#data-movement-and-conversion-instructions-cp-async
__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* gmem_src, uint32_t src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem_dst)), "l"(gmem_src),
               "r"(src_bytes));
}
// The same with the ignore-src operand: `zero` writes 16 zero bytes and reads nothing (the source must still
// be an address; callers pass a valid one). A predicate, unlike a register src-size, costs no per-copy
// arithmetic (ptxas sets the copy's zero-fill predicate directly). PTX ISA "cp.async", ignore-src (link above).
__device__ __forceinline__ void cp_async_16_zfill(void* smem_dst, const void* gmem_src, bool zero) {
  asm volatile(
      "{\n.reg .pred z;\nsetp.ne.b32 z, %2, 0;\n"
      "cp.async.cg.shared.global [%0], [%1], 16, z;\n}\n" ::"r"(smem_addr(smem_dst)),
      "l"(gmem_src), "r"(static_cast<uint32_t>(zero)));
}
// 4-byte cp.async, for the warp-specialized kernels' item records: `.cg` takes only 16-byte copies, so this
// is the `.ca` form (through L1; the records' sources are read once per item). PTX ISA "cp.async" (link above).
__device__ __forceinline__ void cp_async_4(void* smem_dst, const void* gmem_src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(smem_dst)), "l"(gmem_src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Every cp.async this thread issued has landed, committed to a group or not (PTX ISA "cp.async.wait_all":
// a commit_group and a wait_group 0).
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
// Wait until at most N committed groups are still pending (PTX ISA "cp.async.wait_group").
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Four 8x8 b16 matrices from shared memory, one row address per lane (lanes 8i..8i+7 address matrix i).
// Lane l receives row l/4, columns 2*(l%4) and +1 of each matrix: exactly the B fragment layout of
// mma.m16n8k16 when the matrix rows are tokens. PTX ISA "ldmatrix":
// https://docs.nvidia.com/cuda/parallel-thread-execution/#warp-level-matrix-instructions-ldmatrix
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem_row)));
}

// D += A(16x16 bf16, row) * B(16x8 bf16, col), fp32 accumulation. The portable tensor-core MMA
// (sm_80 through sm_120). PTX ISA "mma.m16n8k16":
// https://docs.nvidia.com/cuda/parallel-thread-execution/#warp-level-matrix-instructions-mma
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Byte permute: result byte i = byte sel_i of the 8-byte pair {b:a} (PTX ISA "prmt").
// https://docs.nvidia.com/cuda/parallel-thread-execution/#data-movement-and-conversion-instructions-prmt
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// Any 3-input bitwise function in one instruction; `Lut` is the truth table evaluated on
// a = 0xF0, b = 0xCC, c = 0xAA (PTX ISA "lop3"):
// https://docs.nvidia.com/cuda/parallel-thread-execution/#logic-and-shift-instructions-lop3
template <uint32_t Lut>
__device__ __forceinline__ uint32_t lop3(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, %4;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c), "n"(Lut));
  return d;
}

// mbarrier: a shared-memory barrier object with a phase bit, for the warp-specialized kernels' producer ->
// consumer ("full") and consumer -> producer ("empty") hand-offs, which do not stop the whole block the way
// __syncthreads does. PTX ISA "mbarrier":
// https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-mbarrier
// `count` arrivals complete the current phase and start the next.
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// One arrival of this thread (release semantics: its earlier shared-memory reads and writes happen before).
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// An arrival that happens once every cp.async this thread issued before it has landed; `.noinc`: it is one
// of the `count` arrivals the barrier was initialised with (PTX ISA "cp.async.mbarrier.arrive"):
// https://docs.nvidia.com/cuda/parallel-thread-execution/#data-movement-and-conversion-instructions-cp-async-mbarrier-arrive
__device__ __forceinline__ void cp_async_mbarrier_arrive_noinc(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// Waits until the phase with parity `parity` has completed (acquire semantics: the arrivals' writes are
// visible after it). try_wait may time out (hardware-defined), hence the loop.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// Makes this thread's mbarrier.init visible to the async proxy (the bulk copies that complete transactions on it),
// PTX ISA "fence" (fence.mbarrier_init, sm_90):
// https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-membar
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// Orders this thread's earlier generic-proxy accesses of shared memory before later async-proxy ones (a bulk copy
// that overwrites what the warp has read). PTX ISA "fence.proxy.async" (link above).
__device__ __forceinline__ void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// This thread's arrival on `bar`, after adding `bytes` to the transactions its current phase waits for (PTX ISA
// "mbarrier.arrive", .expect_tx; link at mbarrier_init).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to shared memory by the copy engine, one
// instruction for the whole run, completing that many transactions on `bar` when it has landed (PTX ISA
// "cp.async.bulk", sm_90): one thread puts a warp's whole K range in flight, where per-lane loads need a register
// per 16 bytes.
// https://docs.nvidia.com/cuda/parallel-thread-execution/#data-movement-and-conversion-instructions-cp-async-bulk
__device__ __forceinline__ void cp_async_bulk_g2s(void* smem_dst, const void* gmem_src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(smem_dst)),
               "l"(gmem_src), "r"(bytes), "r"(bar)
               : "memory");
}

// One atomic add at gpu scope with acquire-release semantics, returning the old value (PTX ISA "atom",
// https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-atom;
// memory model: https://docs.nvidia.com/cuda/parallel-thread-execution/#memory-consistency-model). After a block
// barrier, its release side orders every thread's earlier writes of the block before the add (the barrier puts them
// before it in causality order, and release is cumulative), and its acquire side orders the writes that other blocks
// released before their adds before whatever this block reads after the next barrier: the threadfence-reduction
// pattern with one fence in one thread instead of a sequentially consistent fence (MEMBAR.SC) in every thread.
__device__ __forceinline__ int atom_add_acq_rel_gpu(int* p, int v) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

// Moves registers between the warpgroups of a block (PTX ISA "setmaxnreg", sm_90a:
// https://docs.nvidia.com/cuda/parallel-thread-execution/#miscellaneous-instructions-setmaxnreg): every warp of
// the warpgroup runs it. kInc = false gives the registers above kRegs back to the block's pool; kInc = true waits
// until that pool (only what this block's warps gave back) holds enough and raises the limit to kRegs (a multiple
// of 8 in [24, 256]). ptxas allocates the code after it within the new limit.
template <bool kInc, int kRegs>
__device__ __forceinline__ void setmaxnreg() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: a multiple of 8 in [24, 256]");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kInc) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
  else asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

// A 4-byte global load issued where it stands: two of them go out back to back. ptxas sinks a plain load whose value
// only one branch uses into that branch, behind the load the branch tests, and the two round trips to memory then run
// one after the other (the routing's id and router weight: seen in the SASS of 6b85d85). A strong load at CTA scope
// (`ld.relaxed.cta`, PTX ISA "ld" and the memory consistency model:
// https://docs.nvidia.com/cuda/parallel-thread-execution/#data-movement-and-conversion-instructions-ld) is kept in
// place (LDG.E.STRONG.SM in the SASS, both before the branch); its SM scope leaves it to L1, where a GPU-scope load
// sent every warp of the grid to L2 for the same lines (slower at EP8 T=2, docs/perf/shards.md). For data no thread
// writes during the kernel it reads what a plain load would.
__device__ __forceinline__ uint32_t ld_global_u32(const void* p) {
  uint32_t v;
  asm volatile("ld.relaxed.cta.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p));
  return v;
}

// Thread block clusters (sm_90+): this block's rank in its cluster, the cluster's blocks and the cluster's index in
// the grid (PTX ISA "Special Registers": %cluster_ctarank, %cluster_nctarank, %clusterid,
// https://docs.nvidia.com/cuda/parallel-thread-execution/#special-registers-cluster-ctarank).
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t cluster_nctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t clusterid_x() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%clusterid.x;\n" : "=r"(r));
  return r;
}
// Every thread of every block of the cluster arrives, then waits for all of them (PTX ISA "barrier.cluster", sm_90:
// https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-barrier-cluster).
// arrive.release / wait.acquire at cluster scope: each thread's earlier writes, global memory included, are visible
// to every thread of the cluster after its wait (the memory model's release and acquire patterns, "Memory
// Consistency Model"), so one block may read, through L2, what the cluster's other blocks stored before it.
// .aligned: every thread of the warp executes it together (never under divergent control flow).
__device__ __forceinline__ void cluster_sync_release_acquire() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// Programmatic dependent launch (PTX ISA "griddepcontrol", sm_90+):
// https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-griddepcontrol
// A kernel launched with cudaLaunchAttributeProgrammaticStreamSerialization may start while the previous
// kernel of the stream still runs. `wait` blocks until that prerequisite grid has completed and its memory
// operations are visible (a no-op for a normal launch); `launch_dependents` tells the scheduler that the next
// such kernel may start once every block of this grid has issued it (or exited). Older GPUs: no-ops, and the
// host launches normally there.
__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(FP4MOE_NO_GRIDDEP)
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(FP4MOE_NO_GRIDDEP)
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace fp4moe::kernels::ptx
