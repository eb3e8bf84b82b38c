// The roofline PNG of a benchmark result (tools/roofline_plot.h): tools/roofline.py, spawned with argv and a pipe.
// SPDX-License-Identifier: Apache-2.0
#include "roofline_plot.h"

#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

extern char** environ;

namespace fp4moe::cli {
namespace {

bool is_file(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Runs argv[0] (looked up on PATH) with `input` on its standard input; returns its exit code, or -1 with *why.
int run_with_input(const std::vector<std::string>& argv, const std::string& input, std::string* why) {
  int fds[2];
  if (pipe(fds) != 0) {
    *why = std::string("pipe: ") + std::strerror(errno);
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[0], STDIN_FILENO);
  posix_spawn_file_actions_addclose(&fa, fds[1]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[0]);
  if (rc != 0) {
    close(fds[1]);
    *why = argv[0] + ": " + std::strerror(rc);
    return -1;
  }
  // A plotter that exits early must not kill the CLI with SIGPIPE.
  struct sigaction ignore {}, old {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &old);
  size_t done = 0;
  while (done < input.size()) {
    const ssize_t n = write(fds[1], input.data() + done, input.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fds[1]);
  sigaction(SIGPIPE, &old, nullptr);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status)) {
    *why = argv[0] + " was killed";
    return -1;
  }
  return WEXITSTATUS(status);
}

}  // namespace

std::string roofline_script() {
  if (const char* e = std::getenv("FP4MOE_ROOFLINE"); e && *e) return is_file(e) ? e : "";
  std::vector<char> buf(PATH_MAX + 1, '\0');
  const ssize_t n = readlink("/proc/self/exe", buf.data(), PATH_MAX);
  if (n <= 0) return "";
  const std::string exe(buf.data(), static_cast<size_t>(n));
  const std::string dir = exe.substr(0, exe.rfind('/'));
  for (const std::string& p : {dir + "/roofline.py", dir + "/../share/fp4moe/roofline.py"})
    if (is_file(p)) return p;
  return "";
}

Status draw_roofline(const std::string& bench_json, const std::string& png) {
  const std::string script = roofline_script();
  if (script.empty())
    return Status(StatusCode::kNotFound, "roofline.py not found beside the fp4moe binary or in ../share/fp4moe (set FP4MOE_ROOFLINE)");
  std::string why;
  // roofline.py exits with 3 when its python3 lacks matplotlib: then Debian's python3, which scripts/deps equips.
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    const int rc = run_with_input({py, script, "-", png}, bench_json, &why);
    if (rc == 0) return Status::ok();
    if (rc != 3) return Status(StatusCode::kInternal, rc < 0 ? why : "roofline.py failed with exit code " + std::to_string(rc));
  }
  return Status(StatusCode::kNotFound, "no python3 with matplotlib (Debian: apt-get install python3-matplotlib)");
}

}  // namespace fp4moe::cli
