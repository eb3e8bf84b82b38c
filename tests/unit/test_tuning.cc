// Unit tests of the tuning cache: round trip, corrupt / truncated / foreign files, concurrent writers,
// default location, and tactic filtering by the planner.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <csignal>

#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include "fp4moe/file_io.h"
#include "fp4moe/planner.h"
#include "fp4moe/tuning.h"

namespace fp4moe {
namespace {

TuningEnvironment env() { return TuningEnvironment{"NVIDIA H200", 132, 13000, 13000, "0.1.0"}; }
const MoeShape kGlm{256, 6144, 2048, 8};

std::string temp_dir() {
  char tmpl[] = "/tmp/fp4moe-tuning-XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d ? d : "/tmp";
}

TEST(Tuning, BucketsArePowersOfTwo) {
  EXPECT_EQ(tokens_bucket(0), 1);
  EXPECT_EQ(tokens_bucket(1), 1);
  EXPECT_EQ(tokens_bucket(3), 4);
  EXPECT_EQ(tokens_bucket(512), 512);
  EXPECT_EQ(tokens_bucket(513), 1024);
}

TEST(Tuning, RoundTripThroughAFile) {
  const std::string path = temp_dir() + "/sub/dir/tuning.json";  // folders are created
  TuningCache c(env());
  c.record(kGlm, FinalizeMode::kDeterministic, 512, {32, 2497.6});
  c.record(kGlm, FinalizeMode::kDeterministic, 64, {8, 1254.3, 4});
  c.record(kGlm, FinalizeMode::kAtomic, 64, {16, 1200.0});
  c.record(kGlm, FinalizeMode::kDeterministicBf16, 64, {32, 1100.0, 2});
  ASSERT_TRUE(c.save(path).is_ok());
  TuningCache back;
  std::string note = "x";
  ASSERT_TRUE(TuningCache::load(path, env(), &back, &note).is_ok());
  EXPECT_EQ(note, "");
  EXPECT_EQ(back.size(), 4u);
  ASSERT_TRUE(back.lookup(kGlm, FinalizeMode::kDeterministicBf16, 64).has_value());  // its own key, not fp32's
  EXPECT_EQ(back.lookup(kGlm, FinalizeMode::kDeterministicBf16, 64)->block_m, 32);
  EXPECT_EQ(back.lookup(kGlm, FinalizeMode::kDeterministicBf16, 64)->down_k_splits, 2);
  ASSERT_TRUE(back.lookup(kGlm, FinalizeMode::kDeterministic, 300).has_value());
  EXPECT_EQ(back.lookup(kGlm, FinalizeMode::kDeterministic, 300)->block_m, 32);
  EXPECT_DOUBLE_EQ(back.lookup(kGlm, FinalizeMode::kDeterministic, 300)->us, 2497.6);
  EXPECT_EQ(back.lookup(kGlm, FinalizeMode::kAtomic, 64)->block_m, 16);
  EXPECT_FALSE(back.lookup(kGlm, FinalizeMode::kAtomic, 512).has_value());
  EXPECT_FALSE(back.lookup(MoeShape{128, 4096, 1536, 8}, FinalizeMode::kDeterministic, 512).has_value());
  EXPECT_EQ(back.lookup(kGlm, FinalizeMode::kDeterministic, 300)->down_k_splits, 1);
  EXPECT_EQ(back.lookup(kGlm, FinalizeMode::kDeterministic, 64)->down_k_splits, 4);
  const auto choices = back.choices_for(kGlm, FinalizeMode::kDeterministic);
  ASSERT_EQ(choices.size(), 2u);
  EXPECT_EQ(choices.at(64).block_m, 8);
  EXPECT_EQ(choices.at(64).down_k_splits, 4);
  EXPECT_EQ(choices.at(512).block_m, 32);
  EXPECT_EQ(choices.at(512).down_k_splits, 1);
}

// A GPU name that is not UTF-8 (the environment is the caller's text) is saved with U+FFFD in its place instead of an
// exception crossing the API; the file then belongs to that replaced name.
TEST(Tuning, ANameThatIsNotUtf8IsSavedWithoutThrowing) {
  const std::string path = temp_dir() + "/not-utf8/tuning.json";
  TuningCache c(TuningEnvironment{"GPU \xff\xfe", 132, 13000, 13000, "0.1.0"});
  c.record(kGlm, FinalizeMode::kDeterministic, 64, {8, 100.0});
  std::string json;
  EXPECT_NO_THROW(json = c.to_json());
  EXPECT_NE(json.find("GPU \xef\xbf\xbd\xef\xbf\xbd"), std::string::npos) << json;
  const Status s = c.save(path);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  TuningCache back;
  std::string note;
  ASSERT_TRUE(TuningCache::load(path, TuningEnvironment{"GPU \xef\xbf\xbd\xef\xbf\xbd", 132, 13000, 13000, "0.1.0"},
                                &back, &note).is_ok());
  EXPECT_EQ(back.size(), 1u) << note;
}

TEST(Tuning, MissingCorruptTruncatedAndForeignFilesFallBackWithOneLine) {
  const std::string dir = temp_dir();
  TuningCache c(env());
  std::string note;
  // Missing: empty, silent.
  ASSERT_TRUE(TuningCache::load(dir + "/none.json", env(), &c, &note).is_ok());
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(note, "");
  TuningCache good(env());
  good.record(kGlm, FinalizeMode::kDeterministic, 8, {8, 100});
  const std::string text = good.to_json();
  const struct {
    const char* name;
    std::string content;
    const char* why;
  } bad[] = {
      {"garbage", "\x01\x02 not json at all", "not valid JSON"},
      {"truncated", text.substr(0, text.size() / 2), "not valid JSON"},
      {"empty", "", "not valid JSON"},
      {"format", R"({"format": 99, "environment": {}, "entries": []})", "unknown format"},
      {"other gpu", [&] { TuningCache o(TuningEnvironment{"NVIDIA H100", 132, 13000, 13000, "0.1.0"}); return o.to_json(); }(), "recorded for NVIDIA H100"},
      {"other version", [&] { TuningCache o(TuningEnvironment{"NVIDIA H200", 132, 13000, 13000, "0.0.9"}); return o.to_json(); }(), "fp4moe 0.0.9"},
      {"bad block_m", R"({"format":1,"environment":{"gpu":"NVIDIA H200","sms":132,"driver":13000,"runtime":13000,"fp4moe":"0.1.0"},"entries":[{"experts":256,"hidden":6144,"intermediate":2048,"top_k":8,"finalize":"deterministic","tokens_bucket":8,"block_m":12,"us":1}]})", "invalid fields"},
      {"bad down_k_splits", R"({"format":1,"environment":{"gpu":"NVIDIA H200","sms":132,"driver":13000,"runtime":13000,"fp4moe":"0.1.0"},"entries":[{"experts":256,"hidden":6144,"intermediate":2048,"top_k":8,"finalize":"deterministic","tokens_bucket":8,"block_m":8,"down_k_splits":3,"us":1}]})", "invalid fields"},
      {"down_k_splits not dividing I over 64", R"({"format":1,"environment":{"gpu":"NVIDIA H200","sms":132,"driver":13000,"runtime":13000,"fp4moe":"0.1.0"},"entries":[{"experts":256,"hidden":6144,"intermediate":192,"top_k":8,"finalize":"deterministic","tokens_bucket":8,"block_m":8,"down_k_splits":2,"us":1}]})", "invalid fields"},
      {"wrong type", R"({"format":1,"environment":{"gpu":"NVIDIA H200","sms":132,"driver":13000,"runtime":13000,"fp4moe":"0.1.0"},"entries":[{"experts":"256","hidden":6144,"intermediate":2048,"top_k":8,"finalize":"deterministic","tokens_bucket":8,"block_m":8,"us":1}]})", "wrong type"},
      {"float block_m", R"({"format":1,"environment":{"gpu":"NVIDIA H200","sms":132,"driver":13000,"runtime":13000,"fp4moe":"0.1.0"},"entries":[{"experts":256,"hidden":6144,"intermediate":2048,"top_k":8,"finalize":"deterministic","tokens_bucket":8,"block_m":8.9,"us":1}]})", "wrong type"},
      {"environment sms a string", R"({"format":1,"environment":{"gpu":"NVIDIA H200","sms":"132","driver":13000,"runtime":13000,"fp4moe":"0.1.0"},"entries":[]})", "wrongly typed"},
      {"entries not a list", R"({"format":1,"environment":{"gpu":"NVIDIA H200","sms":132,"driver":13000,"runtime":13000,"fp4moe":"0.1.0"},"entries":5})", "not a list"},
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(b.name);
    const std::string path = dir + "/" + b.name + ".json";
    std::ofstream(path) << b.content;
    c = good;
    const Status s = TuningCache::load(path, env(), &c, &note);
    EXPECT_TRUE(s.is_ok()) << "a bad cache is not an error";
    EXPECT_EQ(c.size(), 0u) << "nothing from a bad file is used";
    EXPECT_NE(note.find(b.why), std::string::npos) << note;
    EXPECT_NE(note.find("heuristic"), std::string::npos);
    EXPECT_EQ(note.find('\n'), std::string::npos) << "one line";
  }
  EXPECT_FALSE(TuningCache::load(dir + "/x.json", env(), nullptr, &note).is_ok());
}

TEST(Tuning, ConcurrentWritersLeaveAValidFile) {
  const std::string path = temp_dir() + "/tuning.json";
  std::vector<std::thread> writers;
  for (int w = 0; w < 8; ++w)
    writers.emplace_back([&, w] {
      TuningCache c(env());
      for (int i = 0; i < 200; ++i) c.record(kGlm, FinalizeMode::kDeterministic, int64_t{1} << (i % 12), {8 << (w % 4), double(w)});
      for (int rep = 0; rep < 20; ++rep) ASSERT_TRUE(c.save(path).is_ok());
    });
  for (auto& t : writers) t.join();
  TuningCache back;
  std::string note;
  ASSERT_TRUE(TuningCache::load(path, env(), &back, &note).is_ok());
  EXPECT_EQ(note, "");
  EXPECT_EQ(back.size(), 12u);
  // Every entry came from one writer's cache (no mix of two partial files).
  const int bm = back.lookup(kGlm, FinalizeMode::kDeterministic, 1)->block_m;
  for (int64_t b = 1; b <= 2048; b <<= 1) EXPECT_EQ(back.lookup(kGlm, FinalizeMode::kDeterministic, b)->block_m, bm);
  // No temporary files are left behind.
  const std::string dir = path.substr(0, path.rfind('/'));
  EXPECT_EQ(std::system(("test $(ls " + dir + " | wc -l) -eq 1").c_str()), 0);
}

TEST(Tuning, DefaultLocationFollowsTheEnvironment) {
  setenv("FP4MOE_CACHE_DIR", "/x/y", 1);
  EXPECT_EQ(default_tuning_cache_path(), "/x/y/tuning.json");
  unsetenv("FP4MOE_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(default_tuning_cache_path(), "/xdg/fp4moe/tuning.json");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(default_tuning_cache_path(), "/home/u/.cache/fp4moe/tuning.json");
}

TEST(Tuning, CandidatesAreThePlannerAcceptedShippedConfigs) {
  const ArchInfo* a = nullptr;
  std::vector<int> ok;
  std::vector<std::string> rejected;
  ASSERT_TRUE(find_arch("sm_90", &a).is_ok());
  ASSERT_TRUE(tuning_candidates(kGlm, *a, &ok, &rejected).is_ok());
  if (arch_has_kernels(90)) {
    EXPECT_EQ(ok, shipped_block_ms());
    EXPECT_TRUE(rejected.empty());
  } else {  // a build without sm_90 kernels (host-only): nothing to time there either
    EXPECT_TRUE(ok.empty());
    ASSERT_FALSE(rejected.empty());
    EXPECT_NE(rejected[0].find("not built for sm_90"), std::string::npos) << rejected[0];
  }
  // gpt-oss-120b's 2880 is not a multiple of the 256-wide K tiles: the tiles that need it are rejected, with why.
  ASSERT_TRUE(tuning_candidates(MoeShape{128, 2880, 2880, 4}, *a, &ok, &rejected).is_ok());
  EXPECT_TRUE(ok.empty());
  ASSERT_EQ(rejected.size(), shipped_block_ms().size());
  EXPECT_NE(rejected[0].find(arch_has_kernels(90) ? "does not divide" : "not built"), std::string::npos) << rejected[0];
  // An arch with no kernels built: nothing to time.
  ASSERT_TRUE(find_arch("sm_80", &a).is_ok());
  ASSERT_TRUE(tuning_candidates(kGlm, *a, &ok, &rejected).is_ok());
  EXPECT_TRUE(ok.empty());
  EXPECT_NE(rejected[0].find("not built for sm_80"), std::string::npos) << rejected[0];
  // sm_120 has no warp-specialized tiles, so no 128-token tile: that block_m is not a candidate there, and says why.
  ASSERT_TRUE(find_arch("sm_120", &a).is_ok());
  ASSERT_TRUE(tuning_candidates(kGlm, *a, &ok, &rejected).is_ok());
  EXPECT_EQ(std::count(ok.begin(), ok.end(), 128), 0);
  ASSERT_FALSE(rejected.empty());
  EXPECT_NE(rejected.back().find("block_m 128: no tile of this block_m on sm_120"), std::string::npos) << rejected.back();
}

// Reading: only regular files, at most 4 MiB. /dev/zero (endless), a FIFO (would block until a writer comes) and a
// huge file give an empty cache and a note, at once; none is read.
TEST(Tuning, LoadReadsOnlyBoundedRegularFiles) {
  const std::string dir = temp_dir();
  TuningCache c;
  std::string note;
  ASSERT_TRUE(TuningCache::load("/dev/zero", env(), &c, &note).is_ok());
  EXPECT_EQ(c.size(), 0u);
  EXPECT_NE(note.find("not a regular file"), std::string::npos) << note;
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  note.clear();
  ASSERT_TRUE(TuningCache::load(fifo, env(), &c, &note).is_ok());  // (a hang here is the failure)
  EXPECT_NE(note.find("not a regular file"), std::string::npos) << note;
  const std::string big = dir + "/big.json";
  {
    std::ofstream f(big);
    f << "{\"format\": 1, \"pad\": \"" << std::string(5u << 20, 'x') << "\"}";
  }
  note.clear();
  ASSERT_TRUE(TuningCache::load(big, env(), &c, &note).is_ok());
  EXPECT_NE(note.find("more than"), std::string::npos) << note;
  EXPECT_EQ(TuningCache::load(big, env(), nullptr, &note).code(), StatusCode::kInvalidArgument);
}

// Writing: a missing path or a regular file is written (atomically); a symbolic link is written through, and stays
// a link; a device, a FIFO or a folder at the path is refused and left as it is.
TEST(Tuning, SaveRefusesDevicesAndFifosAndWritesThroughLinks) {
  const std::string dir = temp_dir();
  TuningCache c(env());
  c.record(kGlm, FinalizeMode::kDeterministic, 8, {8, 1.0});
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(c.save(fifo).code(), StatusCode::kInvalidArgument);
  struct stat st {};
  ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  // A character device of our own (as root; /dev/null itself is not risked should this ever regress).
  const std::string dev = dir + "/null";
  if (mknod(dev.c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0) {
    EXPECT_EQ(c.save(dev).code(), StatusCode::kInvalidArgument);
    ASSERT_EQ(lstat(dev.c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the device node was replaced";
  } else {  // (not root: the link to /dev/null below still checks a device path)
    RecordProperty("device_node_case", "not run: mknod needs root");
    std::printf("note: not root, so the device-node case is not run; the link to /dev/null below covers a device\n");
  }
  EXPECT_FALSE(c.save(dir).is_ok()) << "a folder";
  // Through a link to a file in another folder: the target gets the cache, the link stays a link.
  const std::string target_dir = temp_dir(), target = target_dir + "/real.json", link = dir + "/link.json";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  ASSERT_TRUE(c.save(link).is_ok());
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  TuningCache back;
  std::string note;
  ASSERT_TRUE(TuningCache::load(target, env(), &back, &note).is_ok());
  EXPECT_EQ(back.size(), 1u) << note;
  // A link to a device is refused as the device is.
  const std::string devlink = dir + "/dev.json";
  ASSERT_EQ(symlink("/dev/null", devlink.c_str()), 0);
  EXPECT_EQ(c.save(devlink).code(), StatusCode::kInvalidArgument);
}

// A failed write (here: the file size limit, EFBIG) keeps the old file whole, and leaves no temporary file behind.
TEST(Tuning, AFailedWriteKeepsTheOldFile) {
  const std::string dir = temp_dir(), path = dir + "/out.txt";
  ASSERT_TRUE(write_file_atomic(path, "old contents\n").is_ok());
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit capped = old;
  capped.rlim_cur = 4096;
  void (*prev)(int) = std::signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead of killing the test
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &capped), 0);
  const Status s = write_file_atomic(path, std::string(1 << 20, 'n'));
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  std::signal(SIGXFSZ, prev);
  EXPECT_FALSE(s.is_ok());
  std::string back;
  ASSERT_TRUE(read_regular_file(path, 1 << 20, &back).is_ok());
  EXPECT_EQ(back, "old contents\n");
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
    closedir(d);
  }
  EXPECT_EQ(names, std::vector<std::string>{"out.txt"}) << "a temporary file was left behind";
  EXPECT_EQ(check_output_path(dir + "/no/such/folder/x.json").code(), StatusCode::kNotFound);
  EXPECT_TRUE(check_output_path(dir + "/new/folder/x.json", /*create_folders=*/true).is_ok());
}

}  // namespace
}  // namespace fp4moe
