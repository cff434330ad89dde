#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <fstream>

#include "helpers.h"
#include "model/bpe.h"
#include "model/data.h"

namespace gpt2 {
namespace {

void write_raw(const std::string& path, std::vector<int32_t> header, size_t token_bytes) {
  header.resize(256, 0);
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(header.data()), 1024);
  std::string zeros(token_bytes, '\0');
  f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
}

std::string shard_error(const std::string& path) {
  try {
    read_shard(path);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(Shard, RoundTrip) {
  test::TempDir d;
  std::vector<uint16_t> tokens = {0, 1, 50256, 65535, 7};
  write_shard(d / "a.bin", tokens);
  EXPECT_EQ(read_shard(d / "a.bin"), tokens);
  EXPECT_EQ(files::file_size(d / "a.bin"), 1024u + 2 * tokens.size());
}

TEST(Shard, RejectsEachBadHeader) {
  test::TempDir d;
  write_raw(d / "magic.bin", {1234, 1, 2}, 4);
  EXPECT_NE(shard_error(d / "magic.bin").find("magic.bin: bad magic 1234"), std::string::npos);
  write_raw(d / "version.bin", {kShardMagic, 7, 2}, 4);
  EXPECT_NE(shard_error(d / "version.bin").find("version.bin: unsupported shard version 7"), std::string::npos);
  write_raw(d / "size.bin", {kShardMagic, 1, 5}, 4);
  EXPECT_NE(shard_error(d / "size.bin").find("size.bin: header declares 5 tokens (10 bytes) but the file holds 4"),
            std::string::npos);
  write_raw(d / "huge.bin", {kShardMagic, 1, 2'000'000'000}, 4);
  EXPECT_NE(shard_error(d / "huge.bin").find("header declares 2000000000 tokens"), std::string::npos);
  test::write_text(d / "short.bin", "abc");
  EXPECT_NE(shard_error(d / "short.bin").find("short.bin: 3 bytes is too short"), std::string::npos);
  EXPECT_NE(shard_error(d / "missing.bin").find("missing.bin: cannot open"), std::string::npos);
}

TEST(Shard, TokensOutsideTheVocabularyAreRejected) {
  test::TempDir d;
  write_shard(d / "train_0.bin", {1, 2, 300});
  write_shard(d / "val_0.bin", {1, 2});
  DataOptions o;
  o.synthetic = false;
  o.train_glob = d / "train_*.bin";
  o.val_glob = d / "val_*.bin";
  try {
    load_token_data(o, 256, 0);
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("token 300 at position 2 is outside the model's vocabulary of 256"),
              std::string::npos);
  }
  o.train_glob = d / "nothing_*.bin";
  EXPECT_THROW(load_token_data(o, 256, 0), DataError);
}

TEST(Synthetic, DeterministicAndInVocab) {
  auto a = synthetic_corpus(50257, 10000, 5), b = synthetic_corpus(50257, 10000, 5), c = synthetic_corpus(50257, 10000, 6);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (auto t : a) ASSERT_LT(t, 50257);
}

TEST(Synthetic, HasLearnableStructure) {
  // Each token has at most four successors: the empirical bigram entropy is far below ln(vocab).
  auto t = synthetic_corpus(1000, 200000, 1);
  std::map<uint16_t, std::map<uint16_t, int>> next;
  for (size_t i = 0; i + 1 < t.size(); ++i) next[t[i]][t[i + 1]]++;
  for (const auto& [tok, succ] : next) EXPECT_LE(succ.size(), 4u);
}

TEST(Loader, BatchesAreShiftedByOneWithStrideT) {
  auto tokens = at::arange(1000, at::kInt);
  Loader l(tokens, 2, 5);
  auto [x, y] = l.next();
  EXPECT_EQ(x.sizes(), (at::IntArrayRef{2, 5}));
  EXPECT_EQ(x.scalar_type(), at::kLong);
  EXPECT_TRUE(at::equal(y, x + 1));
  EXPECT_EQ(x[1][0].item<int64_t>(), 5);
  auto [x2, y2] = l.next();
  EXPECT_EQ(x2[0][0].item<int64_t>(), 10);
}

TEST(Loader, RanksReadDisjointSlices) {
  auto tokens = at::arange(1000, at::kInt);
  Loader r0(tokens, 2, 5, 0, 2), r1(tokens, 2, 5, 1, 2);
  auto a = r0.next().first, b = r1.next().first, c = r0.next().first;
  EXPECT_EQ(a[0][0].item<int64_t>(), 0);
  EXPECT_EQ(b[0][0].item<int64_t>(), 10);
  EXPECT_EQ(c[0][0].item<int64_t>(), 20);
}

TEST(Loader, TooLittleDataIsAnError) { EXPECT_THROW(Loader(at::arange(10, at::kInt), 2, 5), DataError); }

TEST(Prepare, ByteLevelShardsWithValSplit) {
  test::TempDir d;
  test::write_text(d / "in.txt", std::string(100, 'a') + std::string(900, 'b'));
  PrepareOptions o;
  o.input = d / "in.txt";
  o.out_dir = d / "shards";
  o.val_fraction = 0.1;
  o.shard_tokens = 500;
  auto files = prepare_text(o);
  ASSERT_EQ(files.size(), 3u);  // val_000000, train_000000, train_000001
  auto val = read_shard(d / "shards/val_000000.bin");
  EXPECT_EQ(val, std::vector<uint16_t>(100, 'a'));
  EXPECT_EQ(read_shard(d / "shards/train_000000.bin").size(), 500u);
  EXPECT_EQ(read_shard(d / "shards/train_000001.bin").size(), 400u);
}

TEST(Prepare, BadInputs) {
  test::TempDir d;
  PrepareOptions o;
  o.input = d / "missing.txt";
  o.out_dir = d / "out";
  EXPECT_THROW(prepare_text(o), DataError);
  test::write_text(d / "empty.txt", "");
  o.input = d / "empty.txt";
  EXPECT_THROW(prepare_text(o), DataError);
  test::write_text(d / "x.txt", "hello");
  o.input = d / "x.txt";
  o.encoder_json = d / "encoder.json";
  EXPECT_THROW(prepare_text(o), DataError);  // BPE needs both files
}

TEST(Bpe, PretokenizeLikeGpt2) {
  auto p = Gpt2Bpe::pretokenize("Hello world's  3 cats!!\n");
  std::vector<std::string> want = {"Hello", " world", "'s", " ", " 3", " cats", "!!", "\n"};
  EXPECT_EQ(p, want);
}

TEST(Bpe, EncodesWithMergesInRankOrder) {
  test::TempDir d;
  // Byte-unicode: printable ASCII maps to itself, the space byte to "Ġ" (U+0120).
  test::write_text(d / "encoder.json",
                   R"({"h":0,"e":1,"l":2,"o":3,"Ġ":4,"he":5,"ll":6,"hell":7,"hello":8,"Ġh":9,"Ġhe":10})");
  test::write_text(d / "vocab.bpe", "#version: 0.2\nh e\nl l\nhe ll\nhell o\nĠ h\nĠh e\n");
  Gpt2Bpe bpe(d / "encoder.json", d / "vocab.bpe");
  EXPECT_EQ(bpe.encode("hello hello"), (std::vector<int>{8, 4, 8}));
  EXPECT_EQ(bpe.encode("oh"), (std::vector<int>{3, 0}));
  EXPECT_THROW(bpe.encode("x"), DataError);  // not in the encoder
  test::write_text(d / "bad.json", "{not json");
  EXPECT_THROW(Gpt2Bpe(d / "bad.json", d / "vocab.bpe"), DataError);
}

}  // namespace
}  // namespace gpt2
