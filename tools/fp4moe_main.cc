// fp4moe command-line tool: entry point and subcommand dispatch.
#include <cstdio>

#include "fp4moe/version.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"fp4moe " FP4MOE_VERSION_STRING ": NVFP4 Mixture-of-Experts kernels and shared-memory planner"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", FP4MOE_VERSION_STRING);
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
