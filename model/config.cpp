#include "model/config.h"

#include <cstdio>

#include "bench/yaml_reader.h"
#include "common/enum_names.h"
#include "common/files.h"

namespace gpt2 {

NLOHMANN_JSON_SERIALIZE_ENUM(AttentionImpl, {{AttentionImpl::kManualBuffer, "manual+mask_buffer"},
                                             {AttentionImpl::kManualOnTheFly, "manual+mask_on_the_fly"},
                                             {AttentionImpl::kSdpa, "sdpa"}})
NLOHMANN_JSON_SERIALIZE_ENUM(LayerImpl, {{LayerImpl::kScratch, "scratch"}, {LayerImpl::kNative, "native"}})

int64_t parameter_count(const ModelOptions& m) {
  const int64_t C = m.n_embd, V = m.padded_vocab();
  const int64_t norm = 2 * C;                                     // scale + shift
  const int64_t attn = 3 * (C * C + (m.qkv_bias ? C : 0)) + C * C + C;  // q,k,v + out_proj (biased)
  const int64_t ff = (C * 4 * C + 4 * C) + (4 * C * C + C);
  const int64_t block = norm + attn + norm + ff;
  return V * C + m.context * C + m.n_layer * block + norm + (m.tie_weights ? 0 : V * C);
}

FlopModel flop_model(const ModelOptions& m) {
  const double L = static_cast<double>(m.n_layer), C = static_cast<double>(m.n_embd);
  const double T = static_cast<double>(m.context), V = static_cast<double>(m.padded_vocab());
  FlopModel f;
  f.matmul_weights = L * 12 * C * C + V * C;
  f.attention_causal = 6 * L * C * T;
  f.attention_full = 12 * L * C * T;
  auto n = [](double x) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.0f", x);
    return std::string(buf);
  };
  f.formula = "6*(L*12*C^2 + V*C) + 6*L*C*T = 6*(" + n(L) + "*12*" + n(C) + "^2 + " + n(V) + "*" + n(C) + ") + 6*" +
              n(L) + "*" + n(C) + "*" + n(T) + " = " + n(f.per_token()) +
              " (matmuls only: LM head once, embedding lookups excluded; causal attention; non-causal " +
              n(f.per_token_full_attention()) + ")";
  return f;
}

double flops_per_token(const ModelOptions& m) { return flop_model(m).per_token(); }

std::string to_string(AttentionImpl v) { return enum_name(v); }

std::string to_string(LayerImpl v) { return enum_name(v); }

ModelOptions load_model_preset(const std::string& name_or_path, const std::string& profile_dir) {
  std::vector<std::string> candidates;
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".yaml")) {
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
    for (const auto& c : candidates) tried += (tried.empty() ? "" : ", ") + c;
    throw ConfigError("model preset '" + name_or_path + "' not found (looked for " + tried + ")");
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
