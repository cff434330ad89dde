// defines: ConfigError, MapReader — strict reading of a YAML mapping: every key known, every value
// typed and in range, every error naming file, line, key and what was expected.
#pragma once
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpt2 {

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "file:line: message" (line 1-based; omitted when the node has no position).
[[noreturn]] void config_error(const std::string& file, const YAML::Node& at, const std::string& msg);
// Loads a YAML file; a missing file or a syntax error becomes a ConfigError naming the file.
YAML::Node load_yaml_file(const std::string& path);

class MapReader {
 public:
  // `what` names the mapping in messages ("profile", "model preset").
  MapReader(YAML::Node node, std::string file, std::string what);

  bool has(const std::string& key) const;
  YAML::Node node(const std::string& key) const;  // marks the key as known
  int64_t get_int(const std::string& key, int64_t def, int64_t min, int64_t max);
  double get_double(const std::string& key, double def, double min, double max);
  bool get_bool(const std::string& key, bool def);
  std::string get_string(const std::string& key, const std::string& def);
  std::string get_choice(const std::string& key, const std::string& def, const std::vector<std::string>& choices);
  std::vector<std::string> get_string_list(const std::string& key);
  // Rejects any key not read above, naming it, its line, and the keys that are allowed.
  void finish() const;
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const;
  const std::string& file() const { return file_; }

 private:
  YAML::Node scalar(const std::string& key, const char* expected) const;
  YAML::Node map_;
  std::string file_, what_;
  mutable std::set<std::string> known_;
};

}  // namespace gpt2
