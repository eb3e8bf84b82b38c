#!/usr/bin/env python3
# The rows-by-lanes change as string replacements on kernels/moe_decode_direct.cuh (equal to variant-direct-gate-up-rows-by-lanes.patch), so that it also applies on top of session 29's timeline patch: build-tlrl of next-call.sh. Run from the repository root.
p='kernels/moe_decode_direct.cuh'
s=open(p).read()
def rep(old,new):
    global s
    assert old in s, old[:60]; s=s.replace(old,new,1)
rep("""  // Lane 0: piece q of expert e's tile into its slot (with the tokens' rows of those K groups where `with_x`).
  auto copy_piece = [&](int e, int q, bool with_x) {
    const int ga = piece(q), ng = piece(q + 1) - ga;
    const uint32_t x_bytes = with_x ? static_cast<uint32_t>(p.num_tokens * ng * pack::kGroupK * 2) : 0u;
    ptx::mbarrier_arrive_expect_tx(bar + 8 * q,
                                   static_cast<uint32_t>(ng * (pack::kWeightGroupBytes + pack::kScaleGroupBytes)) + x_bytes);""",
"""  // The tokens' rows of the warp's K groups (only this warp reads them), by its lanes' own 16-byte copies while the ids
  // are in flight: not through the bulk-copy unit, which then carries only the weights and scales (four copies a warp,
  // where the rows made six at T=1, 2 + 2 T in general). Waited for (cp.async.wait_all, __syncwarp) before the first
  // MMA. PTX ISA "cp.async" (ptx.cuh).
  // (Loops without a division, not unrolled: this code runs once, before the ids' shuffle, from a cold instruction
  // cache.) A group's row is 8 pieces of 16 bytes, consecutive in both memories: piece r of the warp's range is byte
  // 16 r from its first group's.
  {
    const int row_pieces = (g_end - g_begin) * 8;
#pragma unroll 1
    for (int t = 0; t < p.num_tokens; ++t) {
      uint8_t* dst = xs + t * L.row_stride + g_begin * pack::kGroupK * 2;
      const __nv_bfloat16* src = p.hidden + static_cast<int64_t>(t) * p.hidden_dim + g_begin * pack::kGroupK;
#pragma unroll 1
      for (int r = lane; r < row_pieces; r += 32) ptx::cp_async_16(dst + r * 16, src + r * 8);
    }
  }
  // Lane 0: piece q of expert e's tile into its slot.
  auto copy_piece = [&](int e, int q) {
    const int ga = piece(q), ng = piece(q + 1) - ga;
    ptx::mbarrier_arrive_expect_tx(bar + 8 * q,
                                   static_cast<uint32_t>(ng * (pack::kWeightGroupBytes + pack::kScaleGroupBytes)));""")
rep("""                           bar + 8 * q);
    if (with_x)
      for (int t = 0; t < p.num_tokens; ++t)
        ptx::cp_async_bulk_g2s(xs + t * L.row_stride + ga * pack::kGroupK * 2,
                               p.hidden + static_cast<int64_t>(t) * p.hidden_dim + ga * pack::kGroupK,
                               ng * pack::kGroupK * 2, bar + 8 * q);
  };""","""                           bar + 8 * q);
  };""")
rep("copy_piece(spec_expert, q, true);","copy_piece(spec_expert, q);")
rep("copies in flight for no chunk of this row: let them land (the tokens' rows stay)","copies in flight for no chunk of this row: let them land")
rep("copy_piece(e, q, spec_expert < 0);","copy_piece(e, q);")
rep("copy_piece(e_next, q, false);","copy_piece(e_next, q);")
rep("""  for (int i = 0; chunk < nc; ++i) {  // (block-uniform)
    if (kChunkLoop && i > 0) __syncthreads();  // warp 0 has read the previous chunk's sums""","""  // The tokens' rows the lanes copied: each lane's own have landed, then every lane's (the warp's slice; a block with
  // no chunk waits too, so that no copy is in flight when it exits).
  ptx::cp_async_wait_all();
  __syncwarp();
  for (int i = 0; chunk < nc; ++i) {  // (block-uniform)
    if (kChunkLoop && i > 0) __syncthreads();  // warp 0 has read the previous chunk's sums""")
rep("""// Each warp's K range arrives by bulk copies issued by its lane 0 right after the ids are read (weights, scales and,
// for the first chunk, the tokens' activations), in kDirectGateUpPieces pieces on as many mbarriers, so the whole tile
// is in flight after one round trip for the ids and each piece is multiplied while the next ones land. A block with
// another chunk""","""// Each warp's K range arrives by bulk copies issued by its lane 0 right after the ids are read (weights and scales;
// the tokens' rows of its K groups by its lanes' own 16-byte copies, issued with the ids' load), in
// kDirectGateUpPieces pieces on as many mbarriers, so the whole tile is in flight after one round trip for the ids
// and each piece is multiplied while the next ones land. A block with another chunk""")
open(p,'w').write(s)
