#include "bench/cli.h"

int main(int argc, char** argv) { return gpt2::cli_main(argc, argv); }
