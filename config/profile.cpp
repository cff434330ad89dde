#include "config/profile.h"

#include "common/enum_names.h"
#include "common/files.h"
#include "common/format.h"

#include <algorithm>

#include "config/presets.h"
#include "config/yaml_reader.h"
#include "variants/registry.h"

namespace gpt2 {

namespace {

// model: a preset name, or {preset: NAME, <overrides>}
ModelOptions read_model(MapReader& r, const std::string& path, const std::string& dir) {
  YAML::Node m = r.node("model");
  if (!m) r.fail("model", "missing: name a model preset, e.g. model: gpt2-mini");
  if (m.IsScalar()) return load_model_preset(m.Scalar(), dir.empty() ? "." : dir);
  MapReader mr(m, path, "model");
  ModelOptions model = load_model_preset(mr.get_string("preset", "gpt2-124m"), dir.empty() ? "." : dir);
  model.context = mr.get_int("context", model.context, 1, 1 << 16);
  model.dropout = mr.get_double("dropout", model.dropout, 0.0, 0.99);
  model.tie_weights = mr.get_bool("tie_weights", model.tie_weights);
  model.qkv_bias = mr.get_bool("qkv_bias", model.qkv_bias);
  mr.finish();
  return model;
}

// data: synthetic, or {train: GLOB, val: GLOB}, or {synthetic_tokens: N}
void read_data(MapReader& r, const std::string& path, const std::string& dir, DataOptions& data) {
  YAML::Node d = r.node("data");
  if (d && d.IsScalar()) {
    if (d.Scalar() != "synthetic") r.fail("data", "expected 'synthetic' or a mapping {train: GLOB, val: GLOB}");
    return;
  }
  if (!d) return;
  MapReader dr(d, path, "data");
  data.synthetic_tokens = dr.get_int("synthetic_tokens", data.synthetic_tokens, 1024, int64_t(1) << 32);
  data.train_glob = dr.get_string("train", "");
  data.val_glob = dr.get_string("val", "");
  data.synthetic = data.train_glob.empty();
  if (data.train_glob.empty() != data.val_glob.empty())
    dr.fail(data.train_glob.empty() ? "val" : "train", "give both 'train' and 'val' shard patterns, or neither");
  for (std::string* g : {&data.train_glob, &data.val_glob})
    if (!g->empty() && (*g)[0] != '/' && !dir.empty()) *g = files::join(dir, *g);
  dr.finish();
}

void read_settings(MapReader& r, const std::string& path, Settings& settings) {
  YAML::Node st = r.node("settings");
  if (!st) return;
  MapReader sr(st, path, "settings");
  const std::string b =
      sr.get_choice("sdpa_backend", "auto", {"auto", "fastest", "flash", "efficient", "cudnn", "math"});
  settings.sdpa_backend = b == "flash"       ? SdpaBackend::kFlash
                          : b == "efficient" ? SdpaBackend::kEfficient
                          : b == "cudnn"     ? SdpaBackend::kCudnn
                          : b == "math"      ? SdpaBackend::kMath
                          : b == "fastest"   ? SdpaBackend::kFastest
                                             : SdpaBackend::kAuto;
  settings.vocab_multiple = sr.get_int("vocab_multiple", settings.vocab_multiple, 1, 1 << 16);
  settings.max_batch = sr.get_int("max_batch", settings.max_batch, 1, 1 << 20);
  // classifier_chunk: tokens a chunk, or fastest (each candidate from the default up timed on the rung's head)
  if (sr.get_string("classifier_chunk", "") == "fastest") {
    settings.classifier_chunk_fastest = true;
  } else {
    try {
      settings.classifier_chunk = sr.get_int("classifier_chunk", settings.classifier_chunk, 1, 1 << 24);
    } catch (const ConfigError&) {
      sr.fail("classifier_chunk", "expected tokens a chunk (1 to 16777216) or fastest, got '" +
                                      sr.get_string("classifier_chunk", "") + "'");
    }
  }
  // classifier_kernel: the fused classifier's CUDA kernel, threads a row or staged, each also with its exponentials
  // in base 2, or fastest (each timed per chunk)
  settings.classifier_kernel =
      sr.get_choice("classifier_kernel", settings.classifier_kernel,
                    {"512", "256", "1024", "staged", "512 exp2", "256 exp2", "1024 exp2", "staged exp2", "fastest"});
  // gelu_backward_slab: fused_gelu_backward's CUDA kernel's rows a block, or fastest (each timed per shape)
  settings.gelu_backward_slab =
      sr.get_choice("gelu_backward_slab", settings.gelu_backward_slab, {"32", "16", "8", "64", "fastest"});
  // residual_norm: how fused_residual_norm's CUDA kernels traverse a row, or fastest (each timed per shape)
  settings.residual_norm =
      sr.get_choice("residual_norm", settings.residual_norm,
                    {"sweeps", "held", "held_forward", "held_backward", "fastest"});
  settings.cpu_memory_budget = static_cast<int64_t>(
      sr.get_double("cpu_memory_budget_gb", settings.cpu_memory_budget / double(1 << 30), 1e-9, 1 << 20) * (1 << 30));
  sr.finish();
}

// plan, variants, recipes
void read_plan(MapReader& r, const std::string& path, Profile& p) {
  p.plan = r.get_choice("plan", p.plan, {"ladder", "add_one", "leave_one_out", "recipes"});
  if (r.has("variants")) p.variants = r.get_string_list("variants");
  if (r.has("references")) p.references = r.get_string_list("references");
  for (const auto& n : p.references)
    if (n != "ref_torch_eager" && n != "ref_torch_compile")
      r.fail("references", "unknown reference rung '" + n + "' (ref_torch_eager, ref_torch_compile)");
  for (const auto& v : p.variants.value_or(std::vector<std::string>{}))
    if (!find_variant(v)) r.fail("variants", "unknown variant '" + v + "' (see gpt2bench list-variants)");
  YAML::Node recipes = r.node("recipes");
  if (recipes) {
    if (!recipes.IsMap()) r.fail("recipes", "expected a mapping of rung name: [variant, ...]");
    for (auto it = recipes.begin(); it != recipes.end(); ++it) {
      MapReader rr(recipes, path, "recipes");
      RungPlan rp{it->first.Scalar(), rr.get_string_list(it->first.Scalar()), RungKind::kRecipe, "", ""};
      for (const auto& v : rp.variants)
        if (!find_variant(v))
          config_error(path, it->second, "recipe '" + rp.name + "': unknown variant '" + v + "' (see gpt2bench list-variants)");
      p.recipes.push_back(std::move(rp));
    }
  }
  if (p.plan == "recipes" && p.recipes.empty()) r.fail("plan", "plan 'recipes' needs a non-empty 'recipes' mapping");
  if (p.plan != "recipes" && recipes) r.fail("recipes", "only read with plan: recipes (the plan is '" + p.plan + "')");
}

}  // namespace

Profile load_profile(const std::string& path) {
  const YAML::Node root = load_yaml_file(path);
  MapReader r(root, path, "profile");
  Profile p;
  p.path = path;
  p.name = r.get_string("name", files::stem(path));
  const std::string dir = files::parent(path);
  p.model = read_model(r, path, dir);
  read_data(r, path, dir, p.data);
  read_settings(r, path, p.settings);
  p.device = r.get_string("device", p.device);
  p.batch = r.get_int("batch", p.batch, 1, 1 << 20);
  p.warmup_steps = r.get_int("warmup_steps", p.warmup_steps, 0, 1'000'000);
  p.steps = r.get_int("steps", p.steps, 1, 1'000'000);
  p.repetitions = r.get_int("repetitions", p.repetitions, 1, 10'000);
  if (p.repetitions < 2)
    r.fail("repetitions", "one repetition has no spread, so no interval and no verdict: give 2 or more (5 or more "
                          "to tell a real difference from noise; GPUs 9)");
  p.parity_steps = r.get_int("parity_steps", p.parity_steps, 0, 10'000);
  // profile_steps: the key's name until the pass was renamed "breakdown" (kept for one release).
  if (r.has("profile_steps") && r.has("breakdown_steps")) r.fail("profile_steps", "give breakdown_steps only");
  p.breakdown_steps = r.get_int(r.has("profile_steps") ? "profile_steps" : "breakdown_steps", p.breakdown_steps, 0, 10'000);
  if (r.has("budget_minutes")) p.budget_minutes = r.get_double("budget_minutes", 0, 0, 7 * 24 * 60);
  p.seed = static_cast<uint64_t>(r.get_int("seed", static_cast<int64_t>(p.seed), 0, INT64_MAX));
  p.lr = r.get_double("lr", p.lr, 0.0, 1e9);
  p.dist_timeout_s = r.get_int("dist_timeout_s", p.dist_timeout_s, 1, 7 * 24 * 3600);
  read_plan(r, path, p);
  r.finish();
  return p;
}

NLOHMANN_JSON_SERIALIZE_ENUM(RungKind, {{RungKind::kBaseline, "baseline"}, {RungKind::kLadder, "ladder"},
                                        {RungKind::kExtra, "extra"}, {RungKind::kAddOne, "add_one"},
                                        {RungKind::kAll, "all"}, {RungKind::kDropOne, "drop_one"},
                                        {RungKind::kRecipe, "recipe"}, {RungKind::kKept, "kept"},
                                        {RungKind::kControl, "control"}})
std::string to_string(RungKind k) { return enum_name(k); }

std::string rung_label(const std::string& name) {
  const auto u = name.find('_');
  return u == std::string::npos ? name : name.substr(u + 1);
}

namespace {

std::string number(size_t i, const std::string& label) { return strf("%02zu_", i) + label; }

// leave_one_out's rung for `v`: every variant but it and but what requires it.
std::vector<std::string> all_but(const std::vector<std::string>& vs, const std::string& v) {
  std::vector<std::string> dropped{v}, rest;
  for (const auto& o : vs) {
    bool needs_dropped = false;
    for (auto r : find_variant(o)->requires_)
      needs_dropped = needs_dropped || std::find(dropped.begin(), dropped.end(), r) != dropped.end();
    if (o == v || needs_dropped) {
      if (o != v) dropped.push_back(o);
    } else {
      rest.push_back(o);
    }
  }
  return rest;
}

// After the extras: `top` again (an extra joins only if it beats the top timed before it and after it, so that
// the machine's drift over the minutes the extras take is not taken for a fusion's gain), then the kept rungs:
// the top (`ladder`'s variants) in one process, compared with `one_process_top` (on one GPU ddp's rung is skipped
// and that is the top again), and the same at the profile's batch where there is a rung `before_batch`, then that
// with the extras that tied the top too: a fixed cost a step (the optimizer's) is lost in a large batch's noise.
void add_kept_rungs(std::vector<RungPlan>& out, const std::vector<std::string>& ladder, const std::string& top,
                    const std::string& one_process_top, const std::string& before_batch) {
  out.push_back({number(out.size(), "top_again"), ladder, RungKind::kControl, top, ""});
  std::vector<std::string> one_process;
  for (const auto& v : ladder)
    if (!find_variant(v)->data_parallel) one_process.push_back(v);
  out.push_back({number(out.size(), "top+kept"), one_process, RungKind::kKept, one_process_top, ""});
  if (!before_batch.empty()) {
    std::erase_if(one_process, [](const std::string& v) { return find_variant(v)->searches_batch; });
    out.push_back({number(out.size(), "planned_batch+kept"), one_process, RungKind::kKept, before_batch, ""});
    out.push_back({number(out.size(), "planned_batch+kept+ties"), one_process, RungKind::kKept, out.back().name, "",
                   true});
  }
}

}  // namespace

std::vector<RungPlan> expand_plan(const Profile& p) {
  std::vector<RungPlan> out{{number(0, "baseline"), {}, RungKind::kBaseline, "", ""}};
  const std::string base = out[0].name;
  if (p.plan == "recipes") {
    for (const auto& r : p.recipes) out.push_back({number(out.size(), r.name), r.variants, RungKind::kRecipe, base, ""});
    return out;
  }
  // Default: the cumulative ladder, then each extra on top of its last rung (less what the extra
  // conflicts with, e.g. bf16_autocast replaces bf16_cast). add_one: every variant. leave_one_out:
  // the ladder's variants (the extras conflict with them, so "all of them" would not resolve).
  std::vector<std::string> vs = p.variants.value_or(std::vector<std::string>{}), extras;
  if (!p.variants)
    for (const auto& v : registry()) {
      if (!v->extra() || p.plan == "add_one") vs.emplace_back(v->name);
      else if (p.plan == "ladder") extras.emplace_back(v->name);
    }
  std::vector<std::string> acc;
  std::string before_batch;  // the ladder's rung before batch_scaling: the last one at the profile's batch
  std::string before_ddp;    // and before ddp: the last one in one process
  if (p.plan == "leave_one_out") out.push_back({number(out.size(), "all"), vs, RungKind::kAll, base, ""});
  const std::string all = out.back().name;  // what each drop_ is measured against
  for (const auto& v : vs) {
    if (p.plan == "ladder") {
      acc.push_back(v);
      const std::string previous = out.back().name;
      if (find_variant(v)->searches_batch) before_batch = previous;
      if (find_variant(v)->data_parallel) before_ddp = previous;
      out.push_back({number(out.size(), v), acc, RungKind::kLadder, previous, v});
    } else if (p.plan == "add_one") {  // the variant, with what it requires
      std::vector<std::string> recipe;
      for (auto r : find_variant(v)->requires_) recipe.emplace_back(r);
      recipe.push_back(v);
      out.push_back({number(out.size(), "add_" + v), recipe, RungKind::kAddOne, base, v});
    } else {  // leave_one_out: all but the variant, and but what requires it
      out.push_back({number(out.size(), "drop_" + v), all_but(vs, v), RungKind::kDropOne, all, v});
    }
  }
  const std::string top = out.back().name;  // the full ladder
  for (const auto& x : extras)
    out.push_back({number(out.size(), "top+" + x), recipe_with(acc, {x}), RungKind::kExtra, top, x});
  // Then the top with every extra that beat it (exact ones: fusions, not a changed precision or problem), in one
  // process; and the same at the profile's batch, where the top's batch is batch_scaling's. Planned as the top
  // (or the rung before batch_scaling); which extras join is settled when the rung starts.
  if (std::none_of(extras.begin(), extras.end(), [](const std::string& x) { return find_variant(x)->keepable(); }))
    return out;
  add_kept_rungs(out, acc, top, before_ddp.empty() ? top : before_ddp, before_batch);
  return out;
}

}  // namespace gpt2
