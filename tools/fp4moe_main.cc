// fp4moe command-line tool: entry point, subcommand dispatch and the one exit-code scheme (tools/cli_args.h).
// SPDX-License-Identifier: Apache-2.0
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "cli_args.h"
#include "commands.h"
#include "fp4moe/build_info.h"
#include "fp4moe/version.h"

namespace {

// What a command printed must have reached its destination: a full disk or a closed pipe is a failure.
int finish(int rc) {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "error: cannot write the output: %s\n", std::strerror(errno ? errno : EIO));
    return rc == fp4moe::cli::kExitOk ? fp4moe::cli::kExitFailed : rc;
  }
  return rc;
}

int run(int argc, char** argv) {
  using namespace fp4moe::cli;
  CLI::App app{"fp4moe " FP4MOE_VERSION_STRING ": NVFP4 Mixture-of-Experts kernels and shared-memory planner"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", fp4moe::build_text());
  // Parse errors (unknown flags, bad numbers, values out of range) in one line on stderr.
  app.failure_message([](const CLI::App*, const CLI::Error& e) { return "error: " + std::string(e.what()) + " (see --help)\n"; });
  int rc = kExitOk;
  add_plan(app, &rc);
  add_report(app, &rc);
  add_bench_and_tune(app, &rc);
  add_quantize_check(app, &rc);
  try {
    app.parse(argc, argv);  // (runs the chosen command's callback)
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help, the version, or the one-line error
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (app.get_subcommands().empty()) std::printf("%s", app.help().c_str());
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  // A write past the file size limit (ulimit -f) fails with EFBIG, which the output code reports and recovers from,
  // instead of the signal ending the process with a temporary file left behind.
  std::signal(SIGXFSZ, SIG_IGN);
  // No exception leaves a command as a crash: out of memory and anything unexpected are one line and exit code 1.
  try {
    return finish(run(argc, argv));
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of host memory\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
  }
  return finish(fp4moe::cli::kExitFailed);
}
