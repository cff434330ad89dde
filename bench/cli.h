// defines: cli_main — the `gpt2bench` command line (subcommands and their help)
#pragma once

namespace gpt2 {
int cli_main(int argc, char** argv);
}
