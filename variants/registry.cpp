#include "variants/registry.h"

#include <algorithm>
#include <stdexcept>

#include "common/enum_names.h"
#include "variants/all.h"

namespace gpt2 {

NLOHMANN_JSON_SERIALIZE_ENUM(ParityClass, {{ParityClass::kExact, "exact"},
                                           {ParityClass::kPrecision, "precision"},
                                           {ParityClass::kFp8, "fp8"},
                                           {ParityClass::kProblem, "problem"}})

std::string to_string(ParityClass v) { return enum_name(v); }
ParityClass parity_class_from(const std::string& name) {
  for (ParityClass c : {ParityClass::kExact, ParityClass::kPrecision, ParityClass::kFp8, ParityClass::kProblem})
    if (to_string(c) == name) return c;
  throw std::invalid_argument("unknown parity class '" + name + "'");
}

std::string variants_markdown() {
  DeviceInfo cpu, a100, h100;
  for (DeviceInfo* g : {&a100, &h100}) g->type = DeviceType::kCuda, g->bf16 = g->tf32 = g->flash_attention = true;
  a100.cc_major = 8, h100.cc_major = 9;
  // "yes" where it runs in one process or in two (ddp needs two, adamw_in_backward one)
  auto runs = [](const Variant& v, DeviceInfo d) {
    for (int processes : {1, 2}) {
      d.world_size = processes;
      if (v.supports(d).ok) return "yes";
    }
    return "no";
  };
  std::string out =
      "| variant | what it does | from | parity | CPU | GPU sm80 | GPU sm90 |\n| --- | --- | --- | --- | --- | --- | --- |\n"
      "| (baseline) | fp32, from-scratch LayerNorm/GELU/attention, registered T×T mask, AdamW as PyTorch picks it "
      "(for-loop on the CPU, foreach on CUDA) | seed 000 rung 0 | reference | yes | yes | yes |\n";
  for (const Variant* v : registry())
    out += "| `" + std::string(v->name) + "`" + (v->extra() ? " (extra)" : "") + " | " + std::string(v->why) + " | " +
           std::string(v->source) + " | " + to_string(v->parity) + " | " + runs(*v, cpu) + " | " + runs(*v, a100) +
           " | " + runs(*v, h100) + " |\n";
  return out;
}

const Variant* find_variant(std::string_view name) {
  for (const auto& v : registry())
    if (v->name == name) return v;
  return nullptr;
}

bool variants_conflict(std::string_view a, std::string_view b) {
  const Variant *va = find_variant(a), *vb = find_variant(b);
  auto lists = [](const Variant* v, std::string_view other) {
    return std::find(v->conflicts.begin(), v->conflicts.end(), other) != v->conflicts.end();
  };
  return va && vb && (lists(va, b) || lists(vb, a));
}

std::vector<std::string> recipe_with(const std::vector<std::string>& base, const std::vector<std::string>& added) {
  std::vector<std::string> out;
  for (const auto& v : base)
    if (std::none_of(added.begin(), added.end(), [&](const std::string& x) { return x == v || variants_conflict(x, v); }))
      out.push_back(v);
  out.insert(out.end(), added.begin(), added.end());
  return out;
}

namespace {
size_t registry_index(const Variant* v) {
  const auto& r = registry();
  for (size_t i = 0; i < r.size(); ++i)
    if (r[i] == v) return i;
  return r.size();
}
}  // namespace

ResolvedRung resolve(const std::string& rung_name, const std::vector<std::string>& names, const StepSpec& base,
                     const DeviceInfo& dev) {
  std::vector<const Variant*> vs;
  for (const auto& n : names) {
    const Variant* v = find_variant(n);
    if (!v) {
      std::string known;
      for (const auto& r : registry()) known += (known.empty() ? "" : ", ") + std::string(r->name);
      throw RecipeError("rung '" + rung_name + "': unknown variant '" + n + "' (known: " + known + ")");
    }
    if (std::find(vs.begin(), vs.end(), v) != vs.end())
      throw RecipeError("rung '" + rung_name + "': variant '" + n + "' named twice");
    vs.push_back(v);
  }
  auto named = [&](std::string_view n) {
    return std::any_of(vs.begin(), vs.end(), [&](const Variant* v) { return v->name == n; });
  };
  for (const Variant* v : vs) {
    for (auto c : v->conflicts)
      if (named(c))
        throw RecipeError("rung '" + rung_name + "': variant '" + std::string(v->name) + "' conflicts with '" +
                          std::string(c) + "'");
    for (auto r : v->requires_)
      if (!named(r))
        throw RecipeError("rung '" + rung_name + "': variant '" + std::string(v->name) + "' requires '" +
                          std::string(r) + "', which the rung does not include");
  }
  // Registry order is the one order every rung applies edits in, so a rung means the same
  // whichever order its recipe lists the names.
  std::sort(vs.begin(), vs.end(), [](const Variant* a, const Variant* b) { return registry_index(a) < registry_index(b); });

  ResolvedRung out;
  out.name = rung_name;
  out.spec = base;
  for (const Variant* v : vs) {
    out.variants.emplace_back(v->name);
    Support s = v->supports(dev);
    if (!s.ok) {
      out.skipped.push_back({std::string(v->name), s.why_not});
      continue;
    }
    v->apply(out.spec);
    out.applied.emplace_back(v->name);
    out.parity = std::max(out.parity, v->parity);
    out.anti = out.anti || v->anti;
  }
  return out;
}

}  // namespace gpt2
