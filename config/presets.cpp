#include "config/presets.h"

#include <set>

#include "common/files.h"
#include "config/yaml_reader.h"

namespace gpt2 {

ModelOptions load_model_preset(const std::string& name_or_path, const std::string& profile_dir) {
  std::vector<std::string> candidates;
  const bool by_path = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".yaml");
  if (by_path) {
    candidates.push_back(files::join(profile_dir, name_or_path));
  } else {
    candidates.push_back(files::join(profile_dir, "models/" + name_or_path + ".yaml"));
    candidates.push_back(files::join(GPT2BENCH_SOURCE_DIR, "profiles/models/" + name_or_path + ".yaml"));
  }
  std::string file;  // a name too long for the OS is "not found", not a crash
  for (const auto& c : candidates)
    if (files::is_file(c)) { file = c; break; }
  if (file.empty()) {
    std::string tried;
    std::set<std::string> known;  // the names a preset could have had
    for (const auto& c : candidates) {
      tried += (tried.empty() ? "" : ", ") + c;
      if (!by_path)
        for (const auto& p : files::glob(files::join(files::parent(c), "*.yaml"))) known.insert(files::stem(p));
    }
    std::string names;
    for (const auto& k : known) names += (names.empty() ? "; presets there: " : ", ") + k;
    throw ConfigError("model preset '" + name_or_path + "' not found (looked for " + tried + names + ")");
  }
  MapReader r(load_yaml_file(file), file, "model preset");
  ModelOptions m;
  m.preset = r.get_string("name", files::stem(file));
  m.vocab_size = r.get_int("vocab_size", m.vocab_size, 2, 1 << 20);
  m.context = r.get_int("context", m.context, 1, 1 << 16);
  m.n_embd = r.get_int("n_embd", m.n_embd, 1, 1 << 16);
  m.n_head = r.get_int("n_head", m.n_head, 1, 1 << 10);
  m.n_layer = r.get_int("n_layer", m.n_layer, 1, 1 << 10);
  m.dropout = r.get_double("dropout", m.dropout, 0.0, 0.99);
  m.qkv_bias = r.get_bool("qkv_bias", m.qkv_bias);
  m.tie_weights = r.get_bool("tie_weights", m.tie_weights);
  if (m.n_embd % m.n_head != 0)
    r.fail("n_head", "n_embd (" + std::to_string(m.n_embd) + ") must be divisible by n_head (" +
                         std::to_string(m.n_head) + ")");
  r.finish();
  return m;
}

}  // namespace gpt2
