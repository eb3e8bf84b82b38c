// Unit tests of the CUTLASS shared-memory model (tools/cutlass_model/cutlass_model.h): formulas, monotonicity, the
// published sm_120 failure (NVIDIA/cutlass#3144), the tactic lists and bad input.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "cutlass_model.h"

namespace fp4moe {
namespace {

constexpr CutlassVersion kV421 = CutlassVersion::k4_2_1;
constexpr CutlassVersion kV450 = CutlassVersion::k4_5_0;

CutlassSm120MoeTactic moe(int m, int n, int k, MoeEpilogueFusion f, bool swap,
                          MoeOutputType out = MoeOutputType::kBf16) {
  CutlassSm120MoeTactic t;
  t.tile_m = m;
  t.tile_n = n;
  t.tile_k = k;
  t.epilogue = f;
  t.swap_ab = swap;
  t.output = out;
  return t;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ---- versions and capacities ---------------------------------------------------------------------------

TEST(CutlassModel, Versions) {
  EXPECT_STREQ(cutlass_version_name(kV421), "4.2.1");
  EXPECT_STREQ(cutlass_version_name(kV450), "4.5.0");
  EXPECT_STREQ(cutlass_flashinfer_release(kV421), "0.6.3");
  EXPECT_STREQ(cutlass_flashinfer_release(kV450), "0.7.4");
  EXPECT_EQ(cutlass_versions(), (std::vector<CutlassVersion>{kV421, kV450}));
  EXPECT_EQ(kLatestCutlassVersion, kV450);

  CutlassVersion v{};
  for (const char* text : {"4.5.0", "4.5", "flashinfer-0.7.4", "latest", ""}) {
    ASSERT_TRUE(parse_cutlass_version(text, &v).is_ok()) << text;
    EXPECT_EQ(v, kV450) << text;
  }
  for (const char* text : {"4.2.1", "4.2", "flashinfer-0.6.3"}) {
    ASSERT_TRUE(parse_cutlass_version(text, &v).is_ok()) << text;
    EXPECT_EQ(v, kV421) << text;
  }
  const Status s = parse_cutlass_version("3.9", &v);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(s.message(), "unknown CUTLASS version '3.9'")) << s.message();
  EXPECT_TRUE(contains(s.message(), "4.2.1 (flashinfer-0.6.3)")) << s.message();
  EXPECT_EQ(parse_cutlass_version("4.5.0", nullptr).code(), StatusCode::kInvalidArgument);
}

TEST(CutlassModel, Capacities) {
  int64_t c = 0;
  ASSERT_TRUE(cutlass_smem_capacity(90, &c).is_ok());
  EXPECT_EQ(c, 232448);
  ASSERT_TRUE(cutlass_smem_capacity(100, &c).is_ok());
  EXPECT_EQ(c, 232448);
  ASSERT_TRUE(cutlass_smem_capacity(120, &c).is_ok());
  EXPECT_EQ(c, 101376);
  ASSERT_TRUE(cutlass_smem_capacity(121, &c).is_ok());
  EXPECT_EQ(c, 101376);
  const Status s = cutlass_smem_capacity(75, &c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(s.message(), "unknown architecture sm_75")) << s.message();
}

// ---- sm_90 builder ------------------------------------------------------------------------------------------

TEST(CutlassModel, Sm90Formula) {
  CutlassSm90GemmShape s;  // bf16 128x128x64
  CutlassSm90StageCount r;
  for (CutlassVersion v : cutlass_versions()) {
    ASSERT_TRUE(cutlass_sm90_stage_count(v, s, &r).is_ok());
    EXPECT_EQ(r.capacity, 232448);
    EXPECT_EQ(r.reduced_capacity, 232448);
    EXPECT_EQ(r.a_bytes, 128 * 64 * 2);
    EXPECT_EQ(r.b_bytes, 128 * 64 * 2);
    EXPECT_EQ(r.pipeline_bytes, 16);
    EXPECT_EQ(r.stage_bytes, 32768 + 16);
    EXPECT_EQ(r.stages, 232448 / 32784);  // 7
  }
  s.carveout_bytes = 100000;  // rounded up to 100,096
  ASSERT_TRUE(cutlass_sm90_stage_count(kV450, s, &r).is_ok());
  EXPECT_EQ(r.carveout_rounded, 100096);
  EXPECT_EQ(r.stages, (232448 - 100096) / 32784);  // 4

  // Grouped: two descriptors and the 8-stage scheduler pipeline, then rounded down to 128.
  s.grouped = true;
  s.carveout_bytes = 0;
  ASSERT_TRUE(cutlass_sm90_stage_count(kV450, s, &r).is_ok());
  EXPECT_EQ(r.tensormap_bytes, 256);
  EXPECT_EQ(r.scheduler_pipeline_bytes, 128);
  EXPECT_EQ(r.reduced_capacity, 232064);
  EXPECT_EQ(r.usable_capacity, 232064);

  // FP8 128x256x128: tiles 16,384 + 32,768, already a multiple of 128.
  CutlassSm90GemmShape f8;
  f8.tile_n = 256;
  f8.tile_k = 128;
  f8.a_bits = f8.b_bits = 8;
  ASSERT_TRUE(cutlass_sm90_stage_count(kV450, f8, &r).is_ok());
  EXPECT_EQ(r.stage_bytes, 49152 + 16);
  EXPECT_EQ(r.stages, 4);
  EXPECT_TRUE(contains(r.describe(), "4 stages")) << r.describe();
}

// ---- block-scaled builders ----------------------------------------------------------------------------------

TEST(CutlassModel, Sm120BuilderByVersion) {
  CutlassBlockScaledShape s;
  s.arch = 120;
  s.tile_m = 128;
  s.tile_n = 256;
  s.tile_k = 128;
  s.carveout_bytes = 17408;
  CutlassBlockScaledStageCount r;
  // 4.5.0 lowers the capacity by the grouped kernel's scheduler pipeline, two descriptors and the
  // descriptor-ready pipeline, and rounds the stage's barriers up to 128.
  ASSERT_TRUE(cutlass_blockscaled_stage_count(kV450, s, &r).is_ok());
  EXPECT_EQ(r.kernel_carveout, 128 + 256 + 48);
  EXPECT_EQ(r.reduced_capacity, 100944);
  EXPECT_EQ(r.a_bytes, 8192);
  EXPECT_EQ(r.b_bytes, 16384);
  EXPECT_EQ(r.sfa_bytes, 1024);
  EXPECT_EQ(r.sfb_bytes, 2048);
  EXPECT_EQ(r.pipeline_bytes, 128);
  EXPECT_EQ(r.stage_bytes, 27776);
  EXPECT_EQ(r.stages, 3);
  // 4.2.1: the full 101,376 B and 16 B of barriers.
  ASSERT_TRUE(cutlass_blockscaled_stage_count(kV421, s, &r).is_ok());
  EXPECT_EQ(r.kernel_carveout, 0);
  EXPECT_EQ(r.reduced_capacity, 101376);
  EXPECT_EQ(r.pipeline_bytes, 16);
  EXPECT_EQ(r.stage_bytes, 27664);
  EXPECT_EQ(r.stages, 3);
  // Dense (non-grouped) 4.5.0: the CLC fetch pipeline and responses instead.
  s.grouped = false;
  ASSERT_TRUE(cutlass_blockscaled_stage_count(kV450, s, &r).is_ok());
  EXPECT_EQ(r.reduced_capacity, 101376 - 48 - 48);
}

TEST(CutlassModel, Sm120SfbQuirkOf421) {
  CutlassBlockScaledShape s;
  s.tile_m = 128;
  s.tile_n = 32;
  s.tile_k = 128;
  CutlassBlockScaledStageCount r;
  ASSERT_TRUE(cutlass_blockscaled_stage_count(kV421, s, &r).is_ok());
  EXPECT_EQ(r.sfb_bytes, 0);  // N < 128: no whole 128-row block
  EXPECT_TRUE(r.sfb_undercounted);
  EXPECT_EQ(r.stage_bytes, 8192 + 2048 + 1024 + 0 + 16);
  EXPECT_TRUE(contains(r.describe(), "SFB undercounted")) << r.describe();
  ASSERT_TRUE(cutlass_blockscaled_stage_count(kV450, s, &r).is_ok());
  EXPECT_EQ(r.sfb_bytes, 1024);  // padded to 128 rows
  EXPECT_FALSE(r.sfb_undercounted);

  // The kernel side of the quirk: one 16-byte SFB array whatever the stage count.
  for (int stages : {2, 5, 8}) {
    CutlassSm120MoeSmem m;
    ASSERT_TRUE(cutlass_sm120_moe_smem(kV421, moe(128, 32, 128, MoeEpilogueFusion::kNone, false), stages, &m).is_ok());
    EXPECT_EQ(m.sfb_bytes, 16);
    ASSERT_TRUE(cutlass_sm120_moe_smem(kV450, moe(128, 32, 128, MoeEpilogueFusion::kNone, false), stages, &m).is_ok());
    EXPECT_EQ(m.sfb_bytes, 1024 * stages);
  }
}

TEST(CutlassModel, Sm100Builder) {
  CutlassBlockScaledShape s;
  s.arch = 100;
  s.tile_m = 128;
  s.tile_n = 128;
  s.tile_k = 256;
  s.grouped = true;
  CutlassBlockScaledStageCount r;
  ASSERT_TRUE(cutlass_blockscaled_stage_count(kV450, s, &r).is_ok());
  // accumulator 32 + 2 CLC pipelines 256 + load order 16 + 2x8 responses 256 + throttle 128 + dealloc 8
  // + TMEM pointers 32 + 5 x 4 descriptors 2,560 + descriptor-ready pipeline 128
  EXPECT_EQ(r.kernel_carveout, 3416);
  EXPECT_EQ(r.reduced_capacity, 232448 - 3416);
  EXPECT_EQ(r.stage_bytes, 16384 + 16384 + 2048 + 2048 + 128);
  EXPECT_EQ(r.stages, 6);
  ASSERT_TRUE(cutlass_blockscaled_stage_count(kV421, s, &r).is_ok());
  EXPECT_EQ(r.kernel_carveout, 984);
  EXPECT_EQ(r.stage_bytes, 16384 + 16384 + 2048 + 2048 + 16);
  // Dense: 2-stage scheduler, no descriptors.
  s.grouped = false;
  ASSERT_TRUE(cutlass_blockscaled_stage_count(kV450, s, &r).is_ok());
  EXPECT_EQ(r.kernel_carveout, 160);
  // N = 256 has one accumulator stage.
  s.tile_n = 256;
  ASSERT_TRUE(cutlass_blockscaled_stage_count(kV450, s, &r).is_ok());
  EXPECT_EQ(r.kernel_carveout, 144);
  // 2-SM 256x192: per SM 128 rows of A, 96 of B; SFB for all of N, padded to 256 rows.
  s.two_sm = true;
  s.tile_m = 256;
  s.tile_n = 192;
  s.grouped = true;
  ASSERT_TRUE(cutlass_blockscaled_stage_count(kV450, s, &r).is_ok());
  EXPECT_EQ(r.a_bytes, 16384);
  EXPECT_EQ(r.b_bytes, 12288);
  EXPECT_EQ(r.sfa_bytes, 2048);
  EXPECT_EQ(r.sfb_bytes, 4096);
}

// More capacity (a smaller carve-out) never means fewer stages, for every builder and version.
TEST(CutlassModel, MoreCapacityNeverFewerStages) {
  for (CutlassVersion v : cutlass_versions()) {
    for (int n : {32, 64, 128, 256}) {
      CutlassBlockScaledShape s;
      s.tile_n = n;
      int previous = 1 << 30;
      for (int64_t carve = 0; carve <= 120000; carve += 512) {
        s.carveout_bytes = carve;
        CutlassBlockScaledStageCount r;
        const Status st = cutlass_blockscaled_stage_count(v, s, &r);
        if (carve > 101376 - 432) {  // past what the builder has left: a negative count, refused
          EXPECT_TRUE(st.is_ok() ? r.stages >= 0 : st.code() == StatusCode::kUnsupported) << carve;
          continue;
        }
        ASSERT_TRUE(st.is_ok()) << st.to_string();
        EXPECT_LE(r.stages, previous) << "sm_120 N=" << n << " carve-out " << carve;
        previous = r.stages;
      }
    }
    CutlassBlockScaledShape s100;
    s100.arch = 100;
    s100.tile_k = 256;
    CutlassSm90GemmShape s90;
    int prev100 = 1 << 30, prev90 = 1 << 30;
    for (int64_t carve = 0; carve <= 240000; carve += 1000) {
      s100.carveout_bytes = carve;
      s90.carveout_bytes = carve;
      CutlassBlockScaledStageCount r100;
      CutlassSm90StageCount r90;
      const Status a = cutlass_blockscaled_stage_count(v, s100, &r100), b = cutlass_sm90_stage_count(v, s90, &r90);
      if (carve > 232448 - 3416) {  // more than the capacity left: CUTLASS's count would be negative
        EXPECT_EQ(a.code() == StatusCode::kOk ? r100.stages >= 0 : a.code() == StatusCode::kUnsupported, true) << carve;
        EXPECT_EQ(b.code() == StatusCode::kOk ? r90.stages >= 0 : b.code() == StatusCode::kUnsupported, true) << carve;
        if (carve > 232448) {
          EXPECT_EQ(b.code(), StatusCode::kUnsupported) << "a carve-out beyond the capacity";
        }
        continue;
      }
      ASSERT_TRUE(a.is_ok()) << a.to_string();
      ASSERT_TRUE(b.is_ok()) << b.to_string();
      EXPECT_LE(r100.stages, prev100);
      EXPECT_LE(r90.stages, prev90);
      prev100 = r100.stages;
      prev90 = r90.stages;
    }
  }
  // And the grouped kernels' reductions (less capacity) never give more stages.
  CutlassSm90GemmShape dense, grouped;
  grouped.grouped = true;
  CutlassSm90StageCount rd, rg;
  ASSERT_TRUE(cutlass_sm90_stage_count(kV450, dense, &rd).is_ok());
  ASSERT_TRUE(cutlass_sm90_stage_count(kV450, grouped, &rg).is_ok());
  EXPECT_GE(rd.stages, rg.stages);
}

// ---- sm_120 MoE SharedStorage --------------------------------------------------------------------------------

// The published case: 128x256x128 FINALIZE, swap_ab off, sm_120: the builder picks 3 stages, the kernel
// needs 102,400 B, 1,024 over 101,376; 2 stages fit at 74,752 B. Same for 256x128x128. Both versions.
TEST(CutlassModel, PublishedSm120Failure) {
  for (CutlassVersion v : cutlass_versions()) {
    for (const auto& t : {moe(128, 256, 128, MoeEpilogueFusion::kFinalize, false),
                          moe(256, 128, 128, MoeEpilogueFusion::kFinalize, false),
                          moe(128, 256, 128, MoeEpilogueFusion::kFinalize, false, MoeOutputType::kFp16)}) {
      CutlassSm120MoePlan p;
      ASSERT_TRUE(cutlass_sm120_moe_plan(v, t, &p).is_ok());
      SCOPED_TRACE(p.describe());
      EXPECT_EQ(p.limit, 101376);
      EXPECT_EQ(p.epilogue.total, 17408);
      EXPECT_EQ(p.builder.stages, 3);
      EXPECT_TRUE(p.builder_compiles);
      EXPECT_EQ(p.smem.total, 102400);
      EXPECT_FALSE(p.fits);
      EXPECT_EQ(p.over_by, 1024);
      EXPECT_EQ(p.largest_fitting_stages, 2);
      EXPECT_EQ(p.largest_fitting_bytes, 74752);
      EXPECT_EQ(p.verdict(), "over by 1,024 B");
      const std::string d = p.describe();
      EXPECT_TRUE(contains(d, "needs 102,400 B: 100,352 tiles (incl. ")) << d;
      EXPECT_TRUE(contains(d, "+ 896 tensor maps")) << d;
      EXPECT_TRUE(contains(d, "limit 101,376: over by 1,024 B; use 2 stages (74,752 B)")) << d;
    }
  }
  // The words, for 128x256x128 (256x128x128 pads 256 B more: its 256 B fusion row).
  CutlassSm120MoePlan p;
  ASSERT_TRUE(cutlass_sm120_moe_plan(kV450, moe(128, 256, 128, MoeEpilogueFusion::kFinalize, false), &p).is_ok());
  EXPECT_EQ(p.describe(),
            "sm_120 MoE 128x256x128 FINALIZE swap_ab=0 bf16 (CUTLASS 4.5.0, flashinfer 0.7.4): builder picks 3 "
            "stages (27,776 B per stage, capacity 100,944 - carve-out 17,408); needs 102,400 B: 100,352 tiles "
            "(incl. 512 B alignment padding) + 224 pipeline barriers + 128 scheduler responses + 896 tensor maps + "
            "800 B alignment padding; limit 101,376: over by 1,024 B; use 2 stages (74,752 B)");
  EXPECT_EQ(p.smem.describe(),
            "3 stages: 102,400 B = 100,352 tiles (A 24,576 + B 49,152 + SFA 3,072 + SFB 6,144 + epilogue 16,384 "
            "C/D staging + 512 fusion, incl. 512 B alignment padding) + 224 pipeline barriers + 128 scheduler "
            "responses + 896 tensor maps (7 x 128) + 800 B alignment padding");

  // Its breakdown, every term.
  CutlassSm120MoeSmem m;
  ASSERT_TRUE(cutlass_sm120_moe_smem(kV450, moe(128, 256, 128, MoeEpilogueFusion::kFinalize, false), 3, &m).is_ok());
  EXPECT_EQ(m.a_bytes, 24576);
  EXPECT_EQ(m.b_offset, 24576);
  EXPECT_EQ(m.b_bytes, 49152);
  EXPECT_EQ(m.sfa_offset, 73728);
  EXPECT_EQ(m.sfa_bytes, 3072);
  EXPECT_EQ(m.sfb_offset, 76800);
  EXPECT_EQ(m.sfb_bytes, 6144);
  EXPECT_EQ(m.mainloop_bytes, 82944);
  EXPECT_EQ(m.epilogue_collective, 16384);
  EXPECT_EQ(m.epilogue_fusion, 512);
  EXPECT_EQ(m.tensors_bytes, 100352);
  EXPECT_EQ(m.tensors_alignment_padding(), 512);
  EXPECT_EQ(m.pipelines_bytes, 128 + 48 + 32 + 16);
  EXPECT_EQ(m.scheduler_response_bytes, 128);
  EXPECT_EQ(m.tensormaps_offset, 100736);
  EXPECT_EQ(m.tensormaps_bytes, 896);
  EXPECT_EQ(m.final_padding, 768);
  EXPECT_EQ(m.total, 102400);
}

// Every byte is accounted for: the terms add up to sizeof, members do not overlap and grow with stages.
TEST(CutlassModel, BreakdownAddsUp) {
  struct Tile {
    int m, n, k;
  };
  const Tile tiles[] = {{128, 32, 128},  {128, 32, 256},  {128, 64, 128},  {128, 64, 256},
                        {128, 128, 128}, {128, 128, 256}, {128, 256, 128}, {256, 128, 128}};
  for (CutlassVersion v : cutlass_versions()) {
    for (const Tile& tile : tiles) {
      for (auto f : {MoeEpilogueFusion::kNone, MoeEpilogueFusion::kFinalize}) {
        for (bool swap : {false, true}) {
          const auto t = moe(tile.m, tile.n, tile.k, f, swap);
          int64_t previous = 0;
          for (int stages = 2; stages <= 9; ++stages) {
            CutlassSm120MoeSmem m;
            ASSERT_TRUE(cutlass_sm120_moe_smem(v, t, stages, &m).is_ok());
            SCOPED_TRACE(t.name() + " " + m.describe());
            EXPECT_EQ(m.total, m.a_bytes + m.b_bytes + m.sfa_bytes + m.sfb_bytes + m.epilogue_collective +
                                   m.epilogue_fusion + m.pipelines_bytes + m.scheduler_response_bytes +
                                   m.tensormaps_bytes + m.alignment_padding());
            EXPECT_LE(m.a_offset + m.a_bytes, m.b_offset);
            EXPECT_LE(m.b_offset + m.b_bytes, m.sfa_offset);
            EXPECT_LE(m.sfa_offset + m.sfa_bytes, m.sfb_offset);
            EXPECT_LE(m.sfb_offset + m.sfb_bytes, m.epilogue_offset);
            EXPECT_LE(m.epilogue_offset + m.epilogue_bytes, m.pipelines_offset);
            EXPECT_EQ(m.pipelines_offset + m.pipelines_bytes, m.scheduler_response_offset);
            EXPECT_LE(m.scheduler_response_offset + m.scheduler_response_bytes, m.tensormaps_offset);
            EXPECT_EQ(m.b_offset % 1024, 0);
            EXPECT_EQ(m.tensormaps_offset % 128, 0);
            EXPECT_EQ(m.total % 1024, 0);
            EXPECT_GT(m.total, previous);
            previous = m.total;
          }
        }
      }
    }
  }
}

TEST(CutlassModel, EpilogueCarveouts) {
  CutlassSm120MoeEpilogue e;
  // NONE: D reuses C's three 64x32 bf16 buffers; row-major D aligns to 512.
  ASSERT_TRUE(cutlass_sm120_moe_epilogue(kV450, moe(128, 128, 128, MoeEpilogueFusion::kNone, false), &e).is_ok());
  EXPECT_TRUE(e.reuse_smem_c);
  EXPECT_EQ(e.stages_c, 3);
  EXPECT_EQ(e.stages_d, 2);
  EXPECT_EQ(e.collective, 3 * 4096);
  EXPECT_EQ(e.tensors, 12800);
  EXPECT_EQ(e.total, 13312);
  // swap_ab: column-major D, 1024-aligned.
  ASSERT_TRUE(cutlass_sm120_moe_epilogue(kV450, moe(128, 128, 128, MoeEpilogueFusion::kNone, true), &e).is_ok());
  EXPECT_EQ(e.total, 14336);
  // FINALIZE: C and D buffers, two each, plus a row of bias (2 B) or router scales (4 B).
  ASSERT_TRUE(cutlass_sm120_moe_epilogue(kV450, moe(128, 256, 128, MoeEpilogueFusion::kFinalize, false), &e).is_ok());
  EXPECT_FALSE(e.reuse_smem_c);
  EXPECT_EQ(e.collective, 16384);
  EXPECT_EQ(e.fusion, 512);
  EXPECT_EQ(e.total, 17408);
  ASSERT_TRUE(cutlass_sm120_moe_epilogue(kV450, moe(128, 256, 128, MoeEpilogueFusion::kFinalize, true), &e).is_ok());
  EXPECT_EQ(e.fusion, 1024);
  EXPECT_EQ(e.total, 18432);
}

// The builder may stop short: 128x32x128 NONE swap_ab picks 6 stages but 7 fit exactly.
TEST(CutlassModel, BuilderCanLeaveAStageUnused) {
  CutlassSm120MoePlan p;
  ASSERT_TRUE(cutlass_sm120_moe_plan(kV450, moe(128, 32, 128, MoeEpilogueFusion::kNone, true), &p).is_ok());
  EXPECT_EQ(p.builder.stages, 6);
  EXPECT_TRUE(p.fits);
  EXPECT_EQ(p.smem.total, 89088);
  EXPECT_EQ(p.largest_fitting_stages, 7);
  EXPECT_EQ(p.largest_fitting_bytes, 101376);
  EXPECT_TRUE(contains(p.describe(), "fits (slack 12,288 B); up to 7 stages (101,376 B) fit")) << p.describe();
}

// ---- tactic lists -----------------------------------------------------------------------------------------

TEST(CutlassModel, TacticLists) {
  const auto t450 = cutlass_sm120_moe_tactics(kV450);
  const auto t421 = cutlass_sm120_moe_tactics(kV421);
  ASSERT_EQ(t450.size(), 8u * 2 * 2);
  ASSERT_EQ(t421.size(), 4u * 2 * 2);
  // Order: tiles with NONE, then FINALIZE, then all again with swap_ab.
  EXPECT_EQ(t450.front().name(), "128x128x256 NONE swap_ab=0 bf16");
  EXPECT_EQ(t450[8].name(), "128x128x256 FINALIZE swap_ab=0 bf16");
  EXPECT_EQ(t450[16].name(), "128x128x256 NONE swap_ab=1 bf16");
  EXPECT_EQ(t450.back().name(), "128x64x128 FINALIZE swap_ab=1 bf16");
  EXPECT_EQ(t421[2].name(), "128x256x128 NONE swap_ab=0 bf16");
  std::set<std::string> names;
  for (const auto& t : t450) names.insert(t.name());
  EXPECT_EQ(names.size(), t450.size());
  EXPECT_EQ(names.count("128x32x128 NONE swap_ab=0 bf16"), 1u);
  EXPECT_EQ(names.count("128x64x256 FINALIZE swap_ab=1 bf16"), 1u);
  for (const auto& t : t421) EXPECT_GE(t.tile_n, 128) << t.name();  // 0.6.3 has no N < 128 tiles
  EXPECT_EQ(cutlass_sm120_moe_tactics(kV450, MoeOutputType::kFp16).front().name(), "128x128x256 NONE swap_ab=0 fp16");

  // Verdicts over the whole list: exactly the two published tactics fail, in both versions.
  for (CutlassVersion v : cutlass_versions()) {
    std::vector<CutlassSm120MoePlan> plans;
    ASSERT_TRUE(cutlass_sm120_moe_plans(v, MoeOutputType::kBf16, &plans).is_ok());
    ASSERT_EQ(plans.size(), cutlass_sm120_moe_tactics(v).size());
    std::set<std::string> failing;
    for (const auto& p : plans) {
      EXPECT_TRUE(p.builder_compiles) << p.describe();
      EXPECT_GE(p.largest_fitting_stages, 2) << p.describe();
      if (!p.fits) failing.insert(p.tactic.name());
    }
    EXPECT_EQ(failing, (std::set<std::string>{"128x256x128 FINALIZE swap_ab=0 bf16",
                                              "256x128x128 FINALIZE swap_ab=0 bf16"}))
        << cutlass_version_name(v);
  }
}

// ---- bad input -----------------------------------------------------------------------------------------------

TEST(CutlassModel, BadInput) {
  CutlassBlockScaledStageCount r;
  CutlassBlockScaledShape s;
  s.arch = 75;
  Status st = cutlass_blockscaled_stage_count(kV450, s, &r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(st.message(), "unknown architecture sm_75")) << st.message();
  s.arch = 90;
  EXPECT_EQ(cutlass_blockscaled_stage_count(kV450, s, &r).code(), StatusCode::kUnsupported);
  s.arch = 120;
  s.two_sm = true;
  EXPECT_EQ(cutlass_blockscaled_stage_count(kV450, s, &r).code(), StatusCode::kInvalidArgument);
  s.two_sm = false;
  s.carveout_bytes = -1;
  EXPECT_EQ(cutlass_blockscaled_stage_count(kV450, s, &r).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cutlass_blockscaled_stage_count(kV450, CutlassBlockScaledShape{}, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cutlass_blockscaled_stage_count(static_cast<CutlassVersion>(7), CutlassBlockScaledShape{}, &r).code(),
            StatusCode::kInvalidArgument);

  CutlassSm120MoeSmem m;
  st = cutlass_sm120_moe_smem(kV450, moe(128, 128, 100, MoeEpilogueFusion::kNone, false), 2, &m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(st.message(), "K must be a multiple of 16")) << st.message();
  st = cutlass_sm120_moe_smem(kV450, moe(128, 128, 96, MoeEpilogueFusion::kNone, false), 2, &m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(st.message(), "not a multiple of the MMA tile")) << st.message();
  st = cutlass_sm120_moe_smem(kV450, moe(128, 48, 128, MoeEpilogueFusion::kNone, false), 2, &m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  st = cutlass_sm120_moe_smem(kV450, moe(64, 128, 128, MoeEpilogueFusion::kNone, false), 2, &m);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_TRUE(contains(st.message(), "M must be a multiple of 128")) << st.message();
  st = cutlass_sm120_moe_smem(kV450, moe(128, 160, 128, MoeEpilogueFusion::kNone, false), 2, &m);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  st = cutlass_sm120_moe_smem(kV450, moe(0, 128, 128, MoeEpilogueFusion::kNone, false), 2, &m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  st = cutlass_sm120_moe_smem(kV450, moe(128, 128, 128, MoeEpilogueFusion::kNone, false), 1, &m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(st.message(), "at least 2")) << st.message();
  EXPECT_EQ(cutlass_sm120_moe_smem(kV450, moe(128, 128, 128, static_cast<MoeEpilogueFusion>(9), false), 2, &m).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cutlass_sm120_moe_plan(kV450, moe(128, 128, 128, MoeEpilogueFusion::kNone, false), nullptr).code(),
            StatusCode::kInvalidArgument);

  CutlassSm90StageCount r90;
  CutlassSm90GemmShape s90;
  s90.a_bits = 4;
  EXPECT_EQ(cutlass_sm90_stage_count(kV450, s90, &r90).code(), StatusCode::kInvalidArgument);
  s90.a_bits = 8;
  EXPECT_EQ(cutlass_sm90_stage_count(kV450, s90, &r90).code(), StatusCode::kUnsupported);  // mixed widths
  s90 = CutlassSm90GemmShape{};
  s90.tile_m = 96;
  st = cutlass_sm90_stage_count(kV450, s90, &r90);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(st.message(), "GMMA")) << st.message();

  CutlassBlockScaledShape s100;
  s100.arch = 100;
  s100.tile_k = 256;
  s100.tile_m = 256;  // needs two_sm
  EXPECT_EQ(cutlass_blockscaled_stage_count(kV450, s100, &r).code(), StatusCode::kUnsupported);
  s100.tile_m = 128;
  s100.tile_k = 200;
  EXPECT_EQ(cutlass_blockscaled_stage_count(kV450, s100, &r).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fp4moe
