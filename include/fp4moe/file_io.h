// Safe file output for fp4moe's results (tuning caches, reports, benchmark tables): checked before, atomic when written.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>

#include "fp4moe/status.h"

namespace fp4moe {

// Whether `path` can take a file written by write_file_atomic: it is missing or a regular file (a symbolic link
// is followed to its target, which must be one of the two), and its folder exists (or, with create_folders, can
// be made) and is writable. Devices, FIFOs, sockets and folders are refused. Writes nothing.
Status check_output_path(const std::string& path, bool create_folders = false);

// Writes `contents` to a temporary file beside `path` (beside the link's target for a symbolic link, so the link
// stays a link), flushes it to disk and renames it over the target: a reader or a concurrent writer sees the old
// file or the new one, never a part, and a failed write (a full disk, a file size limit) leaves the old file as it
// was. Refuses what check_output_path refuses.
Status write_file_atomic(const std::string& path, const std::string& contents, bool create_folders = false);

// Reads a regular file of at most `max_bytes` into *out. kNotFound for a missing file; a file that cannot be
// opened, is not a regular file (a FIFO, a device) or is larger is refused (kInvalidArgument) without reading it.
Status read_regular_file(const std::string& path, int64_t max_bytes, std::string* out);

}  // namespace fp4moe
