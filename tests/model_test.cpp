#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "config/presets.h"
#include "helpers.h"
#include "model/config.h"
#include "model/gpt2.h"

namespace gpt2 {
namespace {

int64_t numel(GPT2Impl& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

ModelOptions gpt2_124m() { return load_model_preset("gpt2-124m", GPT2BENCH_SOURCE_DIR "/profiles"); }

TEST(ModelConfig, SeedParameterCounts) {
  ModelOptions m = gpt2_124m();
  EXPECT_EQ(parameter_count(m), 163'009'536);
  m.tie_weights = true;
  EXPECT_EQ(parameter_count(m), 124'412'160);
  m.tie_weights = false;
  m.vocab_pad_to = 64;
  EXPECT_EQ(m.padded_vocab(), 50304);
  EXPECT_EQ(parameter_count(m), 163'081'728);
}

// Model FLOPs per token: matmuls only (llm.c/nanoGPT/PaLM), the LM head once whether tied or not,
// embedding lookups excluded. GPT-2 124M: 797.8M (llm.c's 6·N_tied + 6·L·C·T is 803.5M: it counts
// the position and norm parameters too); gpt2-mini: 41.15M. The old 6·N_all count said 1035M and 79.9M.
TEST(ModelConfig, FlopsPerTokenCountMatmulsOnly) {
  ModelOptions m = gpt2_124m();
  EXPECT_NEAR(flops_per_token(m), 797.8e6, 0.01 * 797.8e6);
  EXPECT_EQ(flops_per_token(m), 797'815'296.0);
  m.tie_weights = true;
  EXPECT_EQ(flops_per_token(m), 797'815'296.0);  // the head is computed either way
  m.tie_weights = false;
  const FlopModel f = flop_model(m);
  EXPECT_EQ(f.attention_full, 2 * f.attention_causal);
  EXPECT_EQ(f.per_token_full_attention() - f.per_token(), f.attention_causal);
  EXPECT_NE(f.formula.find("= 797815296"), std::string::npos) << f.formula;
  m.vocab_pad_to = 64;  // the padded rows are computed: counted
  EXPECT_EQ(flops_per_token(m) - 797'815'296.0, 6.0 * (50304 - 50257) * 768);
  ModelOptions mini = m;
  mini.vocab_pad_to = 1, mini.context = 128, mini.n_embd = 128, mini.n_head = 4, mini.n_layer = 2;
  EXPECT_NEAR(flops_per_token(mini), 41.15e6, 0.015 * 41.15e6);
  EXPECT_EQ(flops_per_token(mini), 41'153'280.0);
}

// Where GPT-2 124M's training FLOPs go at T=1024, and the CPU preset that keeps it (make ladder's
// default on a CPU): within half a point on each share, unpadded and padded.
TEST(ModelConfig, TheScaledPresetKeepsGpt2FlopShares) {
  ModelOptions big = gpt2_124m();
  const auto s = flop_model(big).shares();
  EXPECT_NEAR(s.blocks, 0.639, 0.0005);
  EXPECT_NEAR(s.lm_head, 0.290, 0.0005);
  EXPECT_NEAR(s.attention, 0.071, 0.0005);
  EXPECT_DOUBLE_EQ(s.blocks + s.lm_head + s.attention, 1.0);
  ModelOptions small = load_model_preset("gpt2-scaled", GPT2BENCH_SOURCE_DIR "/profiles");
  EXPECT_EQ(small.context, 256);
  for (int64_t pad : {1, 64}) {
    big.vocab_pad_to = small.vocab_pad_to = pad;
    const auto b = flop_model(big).shares(), c = flop_model(small).shares();
    EXPECT_NEAR(c.blocks, b.blocks, 0.005) << pad;
    EXPECT_NEAR(c.lm_head, b.lm_head, 0.005) << pad;
    EXPECT_NEAR(c.attention, b.attention, 0.005) << pad;
  }
  EXPECT_LT(flops_per_token(small), flops_per_token(big) / 40);  // a CPU-sized step
}

TEST(Model, Built124MHasTheSeedParameterCounts) {
  ModelOptions o = gpt2_124m();
  GPT2 untied(o);
  EXPECT_EQ(numel(*untied), 163'009'536);
  o.tie_weights = true;
  GPT2 tied(o);
  EXPECT_EQ(numel(*tied), 124'412'160);
  EXPECT_TRUE(tied->head_weight.is_same(tied->tok_emb->weight));
}

TEST(Model, BuiltCountMatchesFormulaForEveryImplementation) {
  for (bool fused : {false, true})
    for (bool bias : {false, true})
      for (int64_t pad : {1, 64}) {
        ModelOptions o = test::tiny_model();
        o.fused_qkv = fused;
        o.qkv_bias = bias;
        o.vocab_pad_to = pad;
        GPT2 m(o);
        EXPECT_EQ(numel(*m), parameter_count(o)) << "fused=" << fused << " bias=" << bias << " pad=" << pad;
      }
}

TEST(Model, ForwardShape) {
  ModelOptions o = test::tiny_model();
  o.vocab_pad_to = 64;
  GPT2 m(o);
  init_weights(*m, 1);
  auto idx = at::randint(o.vocab_size, {3, 11}, at::kLong);
  auto logits = m->forward(idx);
  EXPECT_EQ(logits.sizes(), (at::IntArrayRef{3, 11, 128}));
}

// Kept draws are the seed's draws for those shapes: another model of the same seed and shapes gets them, another
// seed or other shapes (a tied head, fused QKV's slices) its own, each equal to a fresh draw.
TEST(Model, KeptInitialWeightsAreTheDrawsOfTheirSeedAndShapes) {
  auto drawn = [](ModelOptions o, uint64_t seed, bool keep) {
    GPT2 m(o);
    init_weights(*m, seed, keep);
    std::vector<at::Tensor> out;
    for (const auto& [name, view] : canonical_parameters(*m)) out.push_back(view.clone());
    return out;
  };
  auto same = [](const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
    bool eq = a.size() == b.size();
    for (size_t i = 0; eq && i < a.size(); ++i) eq = at::equal(a[i], b[i]);
    return eq;
  };
  ModelOptions o = test::tiny_model(), tied = o, fused = o;
  tied.tie_weights = true;
  fused.fused_qkv = true;
  const auto fresh = drawn(o, 3, false);
  EXPECT_TRUE(same(drawn(o, 3, true), fresh));  // drawn and kept
  EXPECT_TRUE(same(drawn(o, 3, true), fresh));  // from what was kept
  const auto other_seed = drawn(o, 4, true);
  EXPECT_FALSE(same(other_seed, fresh));
  EXPECT_TRUE(same(other_seed, drawn(o, 4, false)));
  EXPECT_TRUE(same(drawn(tied, 4, true), drawn(tied, 4, false)));
  EXPECT_TRUE(same(drawn(fused, 4, true), drawn(o, 4, false)));  // the same canonical weights, in one tensor
}

TEST(Model, RejectsSequencesLongerThanContext) {
  ModelOptions o = test::tiny_model();
  GPT2 m(o);
  EXPECT_THROW(m->forward(at::zeros({1, o.context + 1}, at::kLong)), c10::Error);
}

// Changing a later token must leave every earlier position's logits unchanged.
TEST(Model, Causal) {
  for (auto attn : {AttentionImpl::kManualBuffer, AttentionImpl::kManualOnTheFly, AttentionImpl::kSdpa}) {
    ModelOptions o = test::tiny_model();
    o.attention = attn;
    GPT2 m(o);
    init_weights(*m, 7);
    m->eval();
    auto idx = at::randint(o.vocab_size, {2, 12}, at::kLong);
    auto changed = idx.clone();
    changed.select(1, 8).fill_(0).add_(idx.select(1, 8).add(1).remainder(o.vocab_size));
    auto a = m->forward(idx), b = m->forward(changed);
    EXPECT_TRUE(at::equal(a.slice(1, 0, 8), b.slice(1, 0, 8))) << to_string(attn);
    EXPECT_FALSE(at::allclose(a.slice(1, 8, 9), b.slice(1, 8, 9))) << to_string(attn);
  }
}

TEST(Model, InitIsDeterministicAndLayoutIndependent) {
  ModelOptions o = test::tiny_model();
  ModelOptions fused = o;
  fused.fused_qkv = true;
  fused.vocab_pad_to = 64;
  GPT2 a(o), b(o), c(fused);
  init_weights(*a, 42);
  init_weights(*b, 42);
  init_weights(*c, 42);
  auto pa = canonical_parameters(*a), pb = canonical_parameters(*b), pc = canonical_parameters(*c);
  ASSERT_EQ(pa.size(), pc.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].first, pc[i].first);
    EXPECT_TRUE(at::equal(pa[i].second, pb[i].second)) << pa[i].first;
    EXPECT_TRUE(at::equal(pa[i].second, pc[i].second)) << pa[i].first;
  }
  // Padded rows start at zero, so the padded model computes the same logits on real tokens.
  EXPECT_EQ(c->tok_emb->weight.slice(0, o.vocab_size).abs().sum().item<double>(), 0.0);
  a->eval();
  c->eval();
  auto idx = at::randint(o.vocab_size, {2, 9}, at::kLong);
  EXPECT_TRUE(at::allclose(a->forward(idx), c->forward(idx).slice(2, 0, o.vocab_size), 1e-5, 1e-5));
}

TEST(Model, DefaultInitBounds) {
  ModelOptions o = test::tiny_model();
  GPT2 m(o);
  init_weights(*m, 3);
  const double bound = 1.0 / std::sqrt(static_cast<double>(o.n_embd));
  auto& blk = *m->blocks[0]->as<BlockImpl>();
  EXPECT_LE(blk.attn->query->weight.abs().max().item<double>(), bound);
  EXPECT_LE(blk.ff->fc2->bias.abs().max().item<double>(), 1.0 / std::sqrt(4.0 * o.n_embd));
  EXPECT_NEAR(m->tok_emb->weight.std().item<double>(), 1.0, 0.1);
  EXPECT_TRUE(at::equal(blk.ln1->scale, at::ones({o.n_embd})));
}

// Tied, the shared tensor is drawn as the head, U(±1/√C): both models start near ln V. Drawn as an embedding,
// N(0, 1), the tied one started at 21 here (ln 97 = 4.6), and GPT-2 124M at 482 (the H100 run of 11-27).
TEST(Model, ATiedHeadIsDrawnAsTheHeadAndStartsAtTheUntiedLoss) {
  ModelOptions o = test::tiny_model(), tied = o;
  tied.tie_weights = true;
  const auto idx = at::randint(o.vocab_size, {4, o.context}, at::kLong);
  const auto targets = at::randint(o.vocab_size, {4 * o.context}, at::kLong);
  for (const ModelOptions& opts : {o, tied}) {
    GPT2 m(opts);
    init_weights(*m, 3);
    m->eval();
    const at::Tensor logits = m->forward(idx).flatten(0, 1);
    const double loss = at::cross_entropy_loss(logits, targets).item<double>();
    EXPECT_NEAR(loss, std::log(static_cast<double>(o.vocab_size)), 0.5) << "tied=" << opts.tie_weights;
  }
  GPT2 m(tied);
  init_weights(*m, 3);
  EXPECT_LE(m->tok_emb->weight.abs().max().item<double>(), 1.0 / std::sqrt(static_cast<double>(o.n_embd)));
}

TEST(Model, ScratchAndNativeLayersAgree) {
  auto x = at::randn({4, 7, 32});
  LayerNorm scratch(32, LayerImpl::kScratch), native(32, LayerImpl::kNative);
  EXPECT_TRUE(at::allclose(scratch(x), native(x), 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(gelu_tanh_scratch(x), at::gelu(x, "tanh"), 1e-5, 1e-6));
}

// In training the fused blocks drop the residual branches out with drop_resid's p, each once: at p = 1 - 1e-9
// (every branch dropped; the embeddings' and attention's dropout off) the hidden state is the final norm of the
// embeddings, as the unfused blocks give; in eval it is not.
TEST(Model, FusedResidualNormDropsTheResidualBranchesInTraining) {
  ModelOptions o = test::tiny_model();
  o.attention = AttentionImpl::kSdpa;
  o.dropout = 1 - 1e-9;
  auto idx = at::randint(o.vocab_size, {3, 11}, at::kLong);
  std::vector<at::Tensor> train;
  for (bool fused : {false, true}) {
    o.fused_residual_norm = fused;
    GPT2 m(o);
    init_weights(*m, 1);
    m->drop_emb->options.p(0.0);
    for (const auto& b : *m->blocks) b->as<BlockImpl>()->attn->dropout = 0.0;
    m->train();
    train.push_back(m->hidden(idx));
    const at::Tensor emb = m->tok_emb(idx) + m->pos_emb(at::arange(11, at::kLong));
    EXPECT_TRUE(at::allclose(train.back(), m->final_norm(emb), 1e-5, 1e-5)) << fused;
    m->eval();
    EXPECT_FALSE(at::allclose(m->hidden(idx), train.back(), 1e-2, 1e-2)) << fused;
  }
  EXPECT_TRUE(at::allclose(train[0], train[1], 1e-5, 1e-5));
}

}  // namespace
}  // namespace gpt2
