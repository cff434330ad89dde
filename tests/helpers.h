// defines: test helpers — a tiny model, temporary directories, running the gpt2bench binary
#pragma once
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <c10/util/Exception.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>

#include "bench/runtime/device.h"
#include "common/files.h"
#include "model/config.h"

namespace gpt2::test {

inline DeviceInfo cpu() { return detect_device("cpu"); }

// What `f` threw, a c10::Error without its backtrace; "(no error)" where it threw nothing.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

inline ModelOptions tiny_model() {
  ModelOptions m;
  m.preset = "tiny";
  m.vocab_size = 97;
  m.context = 16;
  m.n_embd = 32;
  m.n_head = 4;
  m.n_layer = 2;
  m.dropout = 0.0;
  return m;
}

// A fresh directory under the system temp dir, removed when the object goes.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/gpt2bench-test-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { files::remove_all(path); }
  std::string operator/(const std::string& name) const { return files::join(path, name); }
};

inline void write_text(const std::string& path, const std::string& text) {
  files::create_dirs(files::parent(path));
  std::ofstream(path) << text;
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_text(path)); }

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line, stdout and stderr together.
inline CommandResult run_command(const std::string& command_line) {
  const std::string cmd = command_line + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// Runs the built gpt2bench with `args` (a shell-quoted string), `env` ("K=V ...") set for it.
inline CommandResult run_gpt2bench(const std::string& args, const std::string& env = "") {
  return run_command((env.empty() ? "" : "env " + env + " ") + GPT2BENCH_BINARY + " " + args);
}

// A profile directory with models/tiny.yaml beside the profile, for fast end-to-end runs.
inline std::string write_tiny_profile(const TempDir& dir, const std::string& body) {
  write_text(dir / "models/tiny.yaml",
             "name: tiny\nvocab_size: 97\ncontext: 16\nn_embd: 32\nn_head: 4\nn_layer: 2\ndropout: 0.1\n");
  write_text(dir / "profile.yaml", body);
  return dir / "profile.yaml";
}

}  // namespace gpt2::test
