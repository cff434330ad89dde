// defines: gpt2::files — the few file operations gpt2bench needs, on POSIX calls.
//
// Why not std::filesystem: torch wheels export statically linked libstdc++ std::filesystem
// symbols (pytorch/pytorch#133437); the dynamic loader may bind our calls to libtorch's copies,
// and on the H100 machine (torch 2.11.0+cu130) that jumped to address 0 in remove_all. PyTorch
// itself moved to POSIX calls for the same reason (pytorch/pytorch#134494). Nothing linked with
// libtorch references std::filesystem; `ctest -R NoStdFilesystem` checks the built binaries.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gpt2::files {

bool exists(const std::string& path);
bool is_file(const std::string& path);  // a regular file (following links)
bool is_dir(const std::string& path);
// The size of a regular file in bytes; throws std::runtime_error naming the path and the reason.
int64_t file_size(const std::string& path);
// mkdir -p; throws std::runtime_error naming the path and the reason.
void create_dirs(const std::string& path);
// rename(2), atomic within a filesystem; throws std::runtime_error naming both paths.
void rename(const std::string& from, const std::string& to);
// Writes `path` via a temporary file in the same directory and a rename, so a reader (or a crash)
// never sees a half-written file. Throws std::runtime_error naming the path.
void write_file_atomic(const std::string& path, const std::string& content);
// rm -rf; a missing path is not an error. Does not follow symbolic links.
void remove_all(const std::string& path);
// The paths matching a shell pattern (glob(3)), sorted; none is not an error.
std::vector<std::string> glob(const std::string& pattern);

// Path strings (POSIX '/' separators only).
std::string join(const std::string& a, const std::string& b);  // b when absolute or a empty
std::string parent(const std::string& path);                   // "" for a bare name
std::string filename(const std::string& path);
std::string stem(const std::string& path);                     // filename less its last extension
bool is_absolute(const std::string& path);

}  // namespace gpt2::files
