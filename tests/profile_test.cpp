#include <gtest/gtest.h>

#include "config/profile.h"
#include "config/yaml_reader.h"
#include "helpers.h"

namespace gpt2 {
namespace {

std::string load_error(const std::string& body) {
  test::TempDir d;
  const auto path = test::write_tiny_profile(d, body);
  try {
    load_profile(path);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Profile, LoadsTheShippedProfiles) {
  for (const char* name : {"cpu-mini", "gpu-124m"}) {
    Profile p = load_profile(std::string(GPT2BENCH_SOURCE_DIR "/profiles/") + name + ".yaml");
    EXPECT_EQ(p.name, name);
    EXPECT_EQ(p.model.vocab_size, 50257);
  }
  // Enough repetitions for a median's interval and a U test everywhere (GPU profiles: 9).
  for (const char* name : {"cpu-mini", "cpu-mini-add-one", "cpu-mini-leave-one-out", "gpu-124m"}) {
    Profile p = load_profile(std::string(GPT2BENCH_SOURCE_DIR "/profiles/") + name + ".yaml");
    EXPECT_GE(p.repetitions, std::string(name).rfind("gpu", 0) == 0 ? 9 : 5) << name;
  }
}

TEST(Profile, ReadsEveryKey) {
  test::TempDir d;
  Profile p = load_profile(test::write_tiny_profile(
      d, "name: t\nmodel: {preset: tiny, context: 8, dropout: 0.0, tie_weights: true}\n"
         "data: {synthetic_tokens: 5000}\ndevice: cpu\nbatch: 2\nwarmup_steps: 1\nsteps: 3\n"
         "repetitions: 2\nparity_steps: 4\nseed: 9\nplan: ladder\nvariants: []\n"
         "settings: {classifier_chunk: 4096}\n"));
  EXPECT_EQ(p.model.preset, "tiny");
  EXPECT_EQ(p.model.context, 8);
  EXPECT_TRUE(p.model.tie_weights);
  EXPECT_EQ(p.data.synthetic_tokens, 5000);
  EXPECT_TRUE(p.data.synthetic);
  EXPECT_EQ(p.batch, 2);
  EXPECT_EQ(p.steps, 3);
  EXPECT_EQ(p.repetitions, 2);
  EXPECT_EQ(p.parity_steps, 4);
  EXPECT_EQ(p.seed, 9u);
  ASSERT_TRUE(p.variants.has_value());
  EXPECT_TRUE(p.variants->empty());
  EXPECT_EQ(expand_plan(p).size(), 1u);  // [] = the baseline alone
  EXPECT_EQ(p.settings.classifier_chunk, 4096);
}

TEST(Profile, TheOldBreakdownKeyNameStillReads) {
  test::TempDir d;
  const auto path = test::write_tiny_profile(d, "model: tiny\nprofile_steps: 4\n");
  EXPECT_EQ(load_profile(path).breakdown_steps, 4);
  const auto both = test::write_tiny_profile(d, "model: tiny\nprofile_steps: 4\nbreakdown_steps: 3\n");
  EXPECT_THROW(load_profile(both), ConfigError);
}

TEST(Profile, MisspelledKeyNamesKeyAndLine) {
  const auto e = load_error("name: t\nmodel: tiny\nbacth: 4\n");
  EXPECT_NE(e.find("profile.yaml:3: unknown key 'bacth' in profile"), std::string::npos) << e;
  EXPECT_NE(e.find("batch"), std::string::npos) << e;  // the allowed keys are listed
}

TEST(Profile, WrongTypeAndRange) {
  auto e = load_error("model: tiny\nbatch: four\n");
  EXPECT_NE(e.find(":2: key 'batch' in profile: expected an integer, got 'four'"), std::string::npos) << e;
  e = load_error("model: tiny\nsteps: 0\n");
  EXPECT_NE(e.find(":2: key 'steps' in profile: expected an integer in [1, 1000000], got 0"), std::string::npos) << e;
  e = load_error("model: tiny\nplan: sideways\n");
  EXPECT_NE(e.find("key 'plan' in profile: expected one of: ladder, add_one, leave_one_out, recipes"), std::string::npos) << e;
  e = load_error("model: tiny\nvariants: [warp_drive]\n");
  EXPECT_NE(e.find("unknown variant 'warp_drive'"), std::string::npos) << e;
  e = load_error("model: tiny\nsettings: {classifier_chunk: 0}\n");
  EXPECT_NE(e.find("key 'classifier_chunk' in settings: expected tokens a chunk (1 to 16777216) or fastest, got '0'"), std::string::npos) << e;
  e = load_error("model: {preset: tiny, contxt: 8}\n");
  EXPECT_NE(e.find(":1: unknown key 'contxt' in model"), std::string::npos) << e;
  e = load_error("model: tiny\ndata: {train: 'a_*.bin'}\n");
  EXPECT_NE(e.find("give both 'train' and 'val'"), std::string::npos) << e;
}

TEST(Profile, MissingOrBrokenFiles) {
  EXPECT_NE(load_error("batch: 4\n").find("key 'model' in profile: missing"), std::string::npos);
  // a name not found says the names there are: the profile's models/ and the source's
  const std::string none = load_error("model: nonesuch\n");
  EXPECT_NE(none.find("model preset 'nonesuch' not found"), std::string::npos) << none;
  EXPECT_NE(none.find("; presets there: gpt2-124m, gpt2-mini, gpt2-scaled, tiny)"), std::string::npos) << none;
  EXPECT_EQ(load_error("model: models/nonesuch.yaml\n").find("presets there"), std::string::npos);
  EXPECT_NE(load_error("model: [unclosed\n").find("YAML syntax error"), std::string::npos);
  EXPECT_NE(load_error("- a\n- b\n").find("must be a YAML mapping"), std::string::npos);
  EXPECT_THROW(load_profile("/nonexistent/profile.yaml"), ConfigError);
  test::TempDir d;
  test::write_text(d / "models/bad.yaml", "name: bad\nn_embd: 30\nn_head: 4\n");
  test::write_text(d / "p.yaml", "model: bad\n");
  try {
    load_profile(d / "p.yaml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.yaml:3: key 'n_head' in model preset: n_embd (30) must be divisible"),
              std::string::npos)
        << e.what();
  }
}

TEST(Plan, BaselineFirstAndNumbered) {
  Profile p;
  p.plan = "recipes";
  p.recipes = {{"mine", {"a"}, RungKind::kRecipe, "", ""}, {"yours", {"b", "c"}, RungKind::kRecipe, "", ""}};
  auto rungs = expand_plan(p);
  ASSERT_EQ(rungs.size(), 3u);
  EXPECT_EQ(rungs[0].name, "00_baseline");
  EXPECT_TRUE(rungs[0].variants.empty());
  EXPECT_EQ(rungs[2].name, "02_yours");
  EXPECT_EQ(rungs[2].variants, (std::vector<std::string>{"b", "c"}));
}

TEST(Plan, LadderAddOneLeaveOneOut) {
  Profile p;
  p.variants = std::vector<std::string>{"mask_on_the_fly", "native_layers", "sdpa"};
  p.plan = "ladder";
  auto l = expand_plan(p);
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l[3].name, "03_sdpa");
  EXPECT_EQ(l[3].variants, (std::vector<std::string>{"mask_on_the_fly", "native_layers", "sdpa"}));
  p.plan = "add_one";
  auto a = expand_plan(p);
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a[2].name, "02_add_native_layers");
  EXPECT_EQ(a[2].variants, (std::vector<std::string>{"native_layers"}));
  p.plan = "leave_one_out";
  auto o = expand_plan(p);
  ASSERT_EQ(o.size(), 5u);
  EXPECT_EQ(o[1].name, "01_all");
  EXPECT_EQ(o[1].variants.size(), 3u);
  EXPECT_EQ(o[2].name, "02_drop_mask_on_the_fly");
  EXPECT_EQ(o[2].variants, (std::vector<std::string>{"native_layers", "sdpa"}));
}

}  // namespace
}  // namespace gpt2
