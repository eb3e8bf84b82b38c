// fp4moe command-line tool: entry point and subcommand dispatch.
// SPDX-License-Identifier: Apache-2.0
#include <cstdio>

#include <string>

#include "fp4moe/build_info.h"
#include "fp4moe/planner.h"
#include "fp4moe/version.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"fp4moe " FP4MOE_VERSION_STRING ": NVFP4 Mixture-of-Experts kernels and shared-memory planner"};
  app.require_subcommand(0, 1);
  // fp4moe 0.3.0 (git 1234abcd5678, CUDA on, kernels for sm_90a sm_120f)
  const fp4moe::BuildInfo b = fp4moe::build_info();
  std::string targets;
  for (const auto& t : fp4moe::built_cuda_targets()) targets += " sm_" + t;
  app.set_version_flag("--version", std::string("fp4moe ") + b.version + " (git " + b.git_hash + ", CUDA " +
                                        (b.cuda ? "on, kernels for" + targets : std::string("off, no kernels")) + ")");
  // Parse errors (unknown flags, bad numbers, values out of range) in one line on stderr.
  app.failure_message([](const CLI::App*, const CLI::Error& e) { return "error: " + std::string(e.what()) + " (see --help)\n"; });
  int rc = 0;
  fp4moe::cli::add_plan(app, &rc);
  fp4moe::cli::add_report(app, &rc);
  fp4moe::cli::add_bench_and_tune(app, &rc);
  fp4moe::cli::add_quantize_check(app, &rc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (app.get_subcommands().empty()) {
    std::printf("%s", app.help().c_str());
    return 0;
  }
  return rc;
}
