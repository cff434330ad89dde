#include "config/yaml_reader.h"

#include "common/files.h"

#include <map>
#include <sstream>

namespace gpt2 {

void config_error(const std::string& file, const YAML::Node& at, const std::string& msg) {
  std::ostringstream s;
  s << file;
  if (at.IsDefined() && at.Mark().line >= 0) s << ":" << at.Mark().line + 1;
  s << ": " << msg;
  throw ConfigError(s.str());
}

YAML::Node load_yaml_file(const std::string& path) {
  if (!files::is_file(path)) throw ConfigError(path + ": no such file");
  try {
    return YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    std::ostringstream s;
    s << path << ":" << e.mark.line + 1 << ": YAML syntax error: " << e.msg;
    throw ConfigError(s.str());
  }
}

MapReader::MapReader(YAML::Node node, std::string file, std::string what)
    : map_(std::move(node)), file_(std::move(file)), what_(std::move(what)) {
  if (!map_.IsMap()) config_error(file_, map_, what_ + " must be a YAML mapping of key: value");
  std::map<std::string, int> first_line;  // yaml-cpp keeps a repeated key, and lookups see only its first value
  for (auto it = map_.begin(); it != map_.end(); ++it) {
    const std::string k = it->first.IsScalar() ? it->first.Scalar() : "";
    const auto [at, fresh] = first_line.emplace(k, it->first.Mark().line + 1);
    if (!fresh && it->first.IsScalar())
      config_error(file_, it->first, "key '" + k + "' in " + what_ + " appears twice (first on line " +
                                         std::to_string(at->second) + "): which value is meant?");
  }
}

bool MapReader::has(const std::string& key) const {
  known_.insert(key);
  return static_cast<bool>(map_[key]);
}

YAML::Node MapReader::node(const std::string& key) const {
  known_.insert(key);
  return map_[key];
}

void MapReader::fail(const std::string& key, const std::string& msg) const {
  YAML::Node n = map_[key];
  config_error(file_, n ? n : map_, "key '" + key + "' in " + what_ + ": " + msg);
}

YAML::Node MapReader::scalar(const std::string& key, const char* expected) const {
  YAML::Node n = node(key);
  if (n && !n.IsScalar()) fail(key, std::string("expected ") + expected);
  return n;
}

int64_t MapReader::get_int(const std::string& key, int64_t def, int64_t min, int64_t max) {
  YAML::Node n = scalar(key, "an integer");
  if (!n) return def;
  int64_t v;
  try {
    v = n.as<int64_t>();
  } catch (const YAML::Exception&) {
    fail(key, "expected an integer, got '" + n.Scalar() + "'");
  }
  if (v < min || v > max)
    fail(key, "expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " +
                  std::to_string(v));
  return v;
}

double MapReader::get_double(const std::string& key, double def, double min, double max) {
  YAML::Node n = scalar(key, "a number");
  if (!n) return def;
  double v;
  try {
    v = n.as<double>();
  } catch (const YAML::Exception&) {
    fail(key, "expected a number, got '" + n.Scalar() + "'");
  }
  if (!(v >= min && v <= max)) {
    std::ostringstream s;
    s << "expected a number in [" << min << ", " << max << "], got " << n.Scalar();
    fail(key, s.str());
  }
  return v;
}

bool MapReader::get_bool(const std::string& key, bool def) {
  YAML::Node n = scalar(key, "true or false");
  if (!n) return def;
  try {
    return n.as<bool>();
  } catch (const YAML::Exception&) {
    fail(key, "expected true or false, got '" + n.Scalar() + "'");
  }
}

std::string MapReader::get_string(const std::string& key, const std::string& def) {
  YAML::Node n = scalar(key, "a string");
  return n ? n.Scalar() : def;
}

std::string MapReader::get_choice(const std::string& key, const std::string& def,
                                  const std::vector<std::string>& choices) {
  std::string v = get_string(key, def);
  for (const auto& c : choices)
    if (c == v) return v;
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
  fail(key, "expected one of: " + list + "; got '" + v + "'");
}

std::vector<std::string> MapReader::get_string_list(const std::string& key) {
  YAML::Node n = node(key);
  std::vector<std::string> out;
  if (!n || n.IsNull()) return out;
  if (!n.IsSequence()) fail(key, "expected a list of names, e.g. [a, b]");
  for (const auto& e : n) {
    if (!e.IsScalar()) config_error(file_, e, "key '" + key + "' in " + what_ + ": expected a list of names");
    out.push_back(e.Scalar());
  }
  return out;
}

void MapReader::finish() const {
  for (auto it = map_.begin(); it != map_.end(); ++it) {
    const std::string k = it->first.Scalar();
    if (known_.count(k)) continue;
    std::string list;
    for (const auto& c : known_) list += (list.empty() ? "" : ", ") + c;
    config_error(file_, it->first, "unknown key '" + k + "' in " + what_ + " (known keys: " + list + ")");
  }
}

}  // namespace gpt2
