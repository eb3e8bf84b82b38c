// Registration of the fp4moe CLI's subcommands (one file per subcommand under tools/).
#pragma once

#include <CLI/CLI.hpp>

namespace fp4moe::cli {

// Each adds its subcommand to `app`; when it runs, it stores its exit code in *rc.
void add_quantize_check(CLI::App& app, int* rc);
void add_plan(CLI::App& app, int* rc);
void add_report(CLI::App& app, int* rc);
void add_bench_and_tune(CLI::App& app, int* rc);

}  // namespace fp4moe::cli
