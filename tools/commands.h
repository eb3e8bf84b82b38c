// Registration of the fp4moe CLI's subcommands (one file per subcommand under tools/).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "cli_args.h"

namespace fp4moe::cli {

// Each adds its subcommand to `app`; when it runs, it stores its exit code in *rc.
void add_quantize_check(CLI::App& app, int* rc);
void add_plan(CLI::App& app, int* rc);
void add_report(CLI::App& app, int* rc);
void add_bench_and_tune(CLI::App& app, int* rc);

// Writes `text` to `path` atomically (fp4moe/file_io.h); on failure prints "error: cannot write PATH: why" and
// returns false.
bool write_text_file(const std::string& path, const std::string& text);

// Used by `report` on a GPU: tune the model's layer within `budget_s` into the default tuning cache, then
// benchmark it (roofline drawn to `plot`); each returns an exit code and its results as JSON text.
int tune_model(const ModelOptions& model, double budget_s, std::string* json);
int bench_model(const ModelOptions& model, const std::string& plot, std::string* json);

}  // namespace fp4moe::cli
