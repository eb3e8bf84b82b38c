// Tuning cache: the fastest kernel config per (GPU, one GPU's layer shape -- a TP or EP shard's own --, tokens
// bucket), persisted as JSON and keyed
// by GPU, SM count, driver, CUDA runtime and fp4moe version; the layer's heuristic is always the fallback.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "fp4moe/moe.h"
#include "fp4moe/status.h"

namespace fp4moe {

struct ArchInfo;

// What a tuned choice is only valid for.
struct TuningEnvironment {
  std::string gpu;      // cudaDeviceProp::name
  int sms = 0;
  int driver = 0;       // cudaDriverGetVersion
  int runtime = 0;      // cudaRuntimeGetVersion
  std::string fp4moe;   // library version
  bool operator==(const TuningEnvironment& o) const {
    return gpu == o.gpu && sms == o.sms && driver == o.driver && runtime == o.runtime && fp4moe == o.fp4moe;
  }
  std::string describe() const;
};

struct TunedChoice {
  int block_m = 0;
  double us = 0;          // the measured layer time it won with
  int down_k_splits = 1;  // K splits of the down GEMM (MoeForwardArgs::down_k_splits): 1, 2, 4 or 8
};

// Powers of two: a run with T tokens uses the entry of the smallest power of two >= T.
int64_t tokens_bucket(int64_t tokens);

class TuningCache {
 public:
  TuningCache() = default;
  explicit TuningCache(TuningEnvironment env) : env_(std::move(env)) {}

  const TuningEnvironment& environment() const { return env_; }
  std::optional<TunedChoice> lookup(const MoeShape& s, FinalizeMode mode, int64_t tokens) const;
  void record(const MoeShape& s, FinalizeMode mode, int64_t bucket, TunedChoice choice);
  size_t size() const { return entries_.size(); }
  // Every entry of one shape and mode: bucket -> choice.
  std::map<int64_t, TunedChoice> choices_for(const MoeShape& s, FinalizeMode mode) const;

  // Reads `path`. A missing file gives an empty cache. A file that is corrupt, truncated, of another format,
  // recorded in another environment, larger than 4 MiB or not a regular file (a FIFO, a device: not read at all)
  // also gives an empty cache (the heuristic stays in charge), with one line in *note saying why; neither is an
  // error. Only a null output is.
  static Status load(const std::string& path, const TuningEnvironment& env, TuningCache* out, std::string* note);
  // The same from the file's text (load reads the file, then parses it); `path` only names it in the note.
  static Status parse(const std::string& text, const TuningEnvironment& env, TuningCache* out, std::string* note,
                      const std::string& path = "(text)");
  // Writes the cache with write_file_atomic (fp4moe/file_io.h): a reader or a concurrent writer never sees a
  // partial file, a failed write keeps the old one, and anything but a regular file or a missing path (a device,
  // a FIFO) is refused; a symbolic link is written through to its target. Creates the folder if needed.
  Status save(const std::string& path) const;

  std::string to_json() const;

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int, int64_t>;  // E, E_global, H, I, k, mode, bucket
  TuningEnvironment env_;
  std::map<Key, TunedChoice> entries_;
};

// $FP4MOE_CACHE_DIR, else $XDG_CACHE_HOME/fp4moe, else $HOME/.cache/fp4moe; then "/tuning.json".
std::string default_tuning_cache_path();

// The kernel configs the tuner may time on `arch` for `shape`: the shipped block_ms whose plans fit (both
// GEMMs); the others listed in *rejected with the planner's reason.
Status tuning_candidates(const MoeShape& shape, const ArchInfo& arch, std::vector<int>* ok,
                         std::vector<std::string>* rejected);

}  // namespace fp4moe
