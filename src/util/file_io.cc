// Safe file output and bounded input (include/fp4moe/file_io.h), on POSIX calls.
// SPDX-License-Identifier: Apache-2.0
#include "fp4moe/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace fp4moe {
namespace {

std::string errno_text() { return std::strerror(errno); }

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// mkdir -p; ok when the folder exists afterwards.
bool make_dirs(const std::string& dir) {
  if (dir.empty()) return true;
  std::string cur;
  size_t i = 0;
  while (i <= dir.size()) {
    const size_t j = std::min(dir.find('/', i), dir.size());
    cur = dir.substr(0, j);
    if (!cur.empty() && mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
    i = j + 1;
  }
  struct stat st {};
  return stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The file a write to `path` lands in: `path`, or the target of the symbolic link(s) it names.
Status resolve_target(const std::string& path, std::string* target) {
  if (path.empty()) return invalid_argument("the output path is empty");
  std::string p = path;
  for (int hops = 0; hops < 16; ++hops) {
    struct stat st {};
    if (lstat(p.c_str(), &st) != 0) {
      if (errno == ENOENT) {
        *target = p;
        return Status::ok();
      }
      return Status(StatusCode::kNotFound, "cannot look at " + p + ": " + errno_text());
    }
    if (!S_ISLNK(st.st_mode)) {
      if (!S_ISREG(st.st_mode))
        return invalid_argument(path + " is not a regular file (a device, FIFO, socket or folder): refusing to replace it");
      *target = p;
      return Status::ok();
    }
    std::vector<char> buf(PATH_MAX + 1);
    const ssize_t n = readlink(p.c_str(), buf.data(), PATH_MAX);
    if (n < 0) return Status(StatusCode::kNotFound, "cannot read the link " + p + ": " + errno_text());
    const std::string link(buf.data(), static_cast<size_t>(n));
    p = !link.empty() && link[0] == '/' ? link : folder_of(p) + "/" + link;
  }
  return invalid_argument(path + ": too many levels of symbolic links");
}

}  // namespace

Status check_output_path(const std::string& path, bool create_folders) {
  std::string target;
  FP4MOE_RETURN_IF_ERROR(resolve_target(path, &target));
  const std::string dir = folder_of(target);
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) {
    if (!create_folders) return Status(StatusCode::kNotFound, "cannot write " + path + ": the folder " + dir + " does not exist");
    if (!make_dirs(dir)) return Status(StatusCode::kNotFound, "cannot create the folder " + dir + ": " + errno_text());
  } else if (!S_ISDIR(st.st_mode)) {
    return Status(StatusCode::kNotFound, "cannot write " + path + ": " + dir + " is not a folder");
  }
  if (access(dir.c_str(), W_OK) != 0) return Status(StatusCode::kNotFound, "cannot write in " + dir + ": " + errno_text());
  return Status::ok();
}

Status write_file_atomic(const std::string& path, const std::string& contents, bool create_folders) {
  FP4MOE_RETURN_IF_ERROR(check_output_path(path, create_folders));
  std::string target;
  FP4MOE_RETURN_IF_ERROR(resolve_target(path, &target));
  std::string tmpl = target + ".tmp.XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  const int fd = mkstemp(name.data());
  if (fd < 0) return Status(StatusCode::kNotFound, "cannot create a temporary file beside " + target + ": " + errno_text());
  const std::string tmp(name.data());
  auto fail = [&](const std::string& what) {
    const std::string why = errno_text();
    close(fd);
    unlink(tmp.c_str());
    return Status(StatusCode::kInternal, what + " " + tmp + ": " + why);
  };
  // Keep the old file's permissions where there is one (mkstemp makes 0600); else the umask's default.
  struct stat old {};
  if (stat(target.c_str(), &old) == 0) {
    (void)fchmod(fd, old.st_mode & 07777);
  } else {
    const mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(fd, 0666 & ~mask);
  }
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("cannot write");
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return fail("cannot flush");
  if (close(fd) != 0) {
    const std::string why = errno_text();
    unlink(tmp.c_str());
    return Status(StatusCode::kInternal, "cannot close " + tmp + ": " + why);
  }
  if (rename(tmp.c_str(), target.c_str()) != 0) {
    const std::string why = errno_text();
    unlink(tmp.c_str());
    return Status(StatusCode::kInternal, "cannot rename " + tmp + " to " + target + ": " + why);
  }
  return Status::ok();
}

Status read_regular_file(const std::string& path, int64_t max_bytes, std::string* out) {
  if (out == nullptr) return invalid_argument("read_regular_file: output is null");
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status(StatusCode::kNotFound, path + " does not exist");
    return invalid_argument("cannot open " + path + ": " + errno_text());
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return invalid_argument(path + " is not a regular file");
  }
  if (st.st_size > max_bytes) {
    close(fd);
    return invalid_argument(path + " is " + std::to_string(st.st_size) + " bytes, more than the " +
                            std::to_string(max_bytes) + " a file of this kind may have");
  }
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = read(fd, &data[done], data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // (a file that shrank while read: what is there)
    done += static_cast<size_t>(n);
  }
  close(fd);
  data.resize(done);
  *out = std::move(data);
  return Status::ok();
}

}  // namespace fp4moe
