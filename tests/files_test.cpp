// common/files: the POSIX file operations that replace std::filesystem in code linked with libtorch.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>

#include <csignal>
#include <stdexcept>

#include "common/files.h"
#include "helpers.h"

namespace gpt2 {
namespace {

TEST(Files, PathStrings) {
  EXPECT_EQ(files::join("a", "b.yaml"), "a/b.yaml");
  EXPECT_EQ(files::join("a/", "b"), "a/b");
  EXPECT_EQ(files::join("", "b"), "b");
  EXPECT_EQ(files::join("a", "/abs/b"), "/abs/b");
  EXPECT_EQ(files::parent("profiles/models/x.yaml"), "profiles/models");
  EXPECT_EQ(files::parent("x.yaml"), "");
  EXPECT_EQ(files::parent("/x"), "/");
  EXPECT_EQ(files::parent("a/b/"), "a");
  EXPECT_EQ(files::stem("profiles/cpu-mini.yaml"), "cpu-mini");
  EXPECT_EQ(files::stem("dir/.hidden"), ".hidden");
  EXPECT_EQ(files::stem("a.tar.gz"), "a.tar");
  EXPECT_EQ(files::filename("a/b/c.json"), "c.json");
  EXPECT_TRUE(files::is_absolute("/tmp"));
  EXPECT_FALSE(files::is_absolute("tmp"));
}

TEST(Files, CreateRenameSizeRemove) {
  test::TempDir d;
  const std::string deep = d / "x/y/z";
  files::create_dirs(deep);
  files::create_dirs(deep);  // idempotent
  EXPECT_TRUE(files::is_dir(deep));
  test::write_text(deep + "/f.txt", "hello");
  EXPECT_TRUE(files::is_file(deep + "/f.txt"));
  EXPECT_FALSE(files::is_file(deep));
  EXPECT_EQ(files::file_size(deep + "/f.txt"), 5);
  files::rename(deep + "/f.txt", deep + "/g.txt");
  EXPECT_FALSE(files::exists(deep + "/f.txt"));
  EXPECT_TRUE(files::exists(deep + "/g.txt"));
  ASSERT_EQ(symlink("/nonexistent-target", (deep + "/link").c_str()), 0);  // a dangling link is removed, not followed
  test::write_text(deep + "/a.txt", ""), test::write_text(deep + "/b.bin", "");
  EXPECT_EQ(files::glob(deep + "/*.txt"), (std::vector<std::string>{deep + "/a.txt", deep + "/g.txt"}));  // sorted
  EXPECT_TRUE(files::glob(deep + "/*.yaml").empty());  // none is not an error
  files::remove_all(d / "x");
  EXPECT_FALSE(files::exists(d / "x"));
  files::remove_all(d / "never-was");  // not an error
}

TEST(Files, ErrorsNameThePathAndTheReason) {
  test::TempDir d;
  try {
    files::file_size(d / "missing.bin");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.bin: cannot read its size (No such file or directory)"),
              std::string::npos) << e.what();
  }
  test::write_text(d / "plain", "x");
  EXPECT_THROW(files::create_dirs(d / "plain/sub"), std::runtime_error);  // a file stands in the way
  EXPECT_THROW(files::rename(d / "missing", d / "other"), std::runtime_error);
  EXPECT_FALSE(files::is_file(std::string(5000, 'a')));  // a name too long for the OS: false, no throw
}

// A disk that fills mid-write (faked by a file-size limit: the write fails as on a full disk, EFBIG for ENOSPC): the
// error says the OS's reason, the partial file is gone, and what was there before stands.
TEST(Files, AFailedWriteSaysWhyAndLeavesNothingBehind) {
  test::TempDir d;
  files::write_file_atomic(d / "rungs.json", "before");
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // the write then fails instead of ending the process
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string error;
  try {
    files::write_file_atomic(d / "rungs.json", std::string(1 << 20, 'x'));
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(error.find("rungs.json: write failed (File too large)"), std::string::npos) << error;
  EXPECT_EQ(test::read_text(d / "rungs.json"), "before");
  EXPECT_EQ(files::glob(d / "rungs.json.tmp.*").size(), 0u);
}

}  // namespace
}  // namespace gpt2
