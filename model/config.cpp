#include "model/config.h"

#include "common/enum_names.h"
#include "common/format.h"

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
  f.blocks = L * 12 * C * C;
  f.head = V * C;
  f.matmul_weights = f.blocks + f.head;
  f.attention_causal = 6 * L * C * T;
  f.attention_full = 12 * L * C * T;
  auto n = [](double x) { return strf("%.0f", x); };
  f.formula = "6*(L*12*C^2 + V*C) + 6*L*C*T = 6*(" + n(L) + "*12*" + n(C) + "^2 + " + n(V) + "*" + n(C) + ") + 6*" +
              n(L) + "*" + n(C) + "*" + n(T) + " = " + n(f.per_token()) +
              " (matmuls only: LM head once, embedding lookups excluded; causal attention; non-causal " +
              n(f.per_token_full_attention()) + ")";
  return f;
}

double flops_per_token(const ModelOptions& m) { return flop_model(m).per_token(); }

std::string to_string(AttentionImpl v) { return enum_name(v); }

std::string to_string(LayerImpl v) { return enum_name(v); }


}  // namespace gpt2
