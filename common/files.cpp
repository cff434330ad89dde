#include "common/files.h"

#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace gpt2::files {
namespace {
std::runtime_error os_error(const std::string& what, const std::string& path, int err) {
  return std::runtime_error(path + ": " + what + " (" + std::strerror(err) + ")");
}
bool stat_path(const std::string& path, struct stat& st) { return ::stat(path.c_str(), &st) == 0; }
}  // namespace

bool exists(const std::string& path) {
  struct stat st {};
  return stat_path(path, st);
}

bool is_file(const std::string& path) {
  struct stat st {};
  return stat_path(path, st) && S_ISREG(st.st_mode);
}

bool is_dir(const std::string& path) {
  struct stat st {};
  return stat_path(path, st) && S_ISDIR(st.st_mode);
}

int64_t file_size(const std::string& path) {
  struct stat st {};
  if (!stat_path(path, st)) throw os_error("cannot read its size", path, errno);
  if (!S_ISREG(st.st_mode)) throw std::runtime_error(path + ": not a regular file");
  return static_cast<int64_t>(st.st_size);
}

void create_dirs(const std::string& path) {
  if (path.empty() || is_dir(path)) return;
  const std::string up = parent(path);
  if (!up.empty() && up != path) create_dirs(up);
  if (::mkdir(path.c_str(), 0777) != 0 && !(errno == EEXIST && is_dir(path)))
    throw os_error("cannot create directory", path, errno);
}

void rename(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) throw os_error("cannot rename to " + to, from, errno);
}

void remove_all(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) throw os_error("cannot remove", path, errno);
    return;
  }
  // Depth first, not following links: each entry after its contents.
  auto remove_one = [](const char* p, const struct stat*, int flag, struct FTW*) -> int {
    return (flag == FTW_DP ? ::rmdir(p) : ::unlink(p)) == 0 || errno == ENOENT ? 0 : -1;
  };
  if (::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0) throw os_error("cannot remove", path, errno);
}

std::vector<std::string> glob(const std::string& pattern) {
  glob_t g{};
  std::vector<std::string> paths;
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) paths.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  std::sort(paths.begin(), paths.end());
  return paths;
}

void write_file_atomic(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw os_error("cannot write", path, errno);
  int err = 0;  // the OS's reason (ENOSPC: a full disk), the partial file removed
  for (size_t done = 0; done < content.size() && !err;) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n > 0) done += static_cast<size_t>(n);
    else if (n == 0 || errno != EINTR) err = n == 0 ? EIO : errno;
  }
  if (::close(fd) != 0 && !err) err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    throw os_error("write failed", path, err);
  }
  rename(tmp, path);
}

std::string join(const std::string& a, const std::string& b) {
  if (a.empty() || is_absolute(b)) return b;
  if (b.empty()) return a;
  return a.back() == '/' ? a + b : a + "/" + b;
}

std::string parent(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const auto slash = p.rfind('/');
  if (slash == std::string::npos) return "";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}

std::string filename(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string stem(const std::string& path) {
  const std::string name = filename(path);
  const auto dot = name.rfind('.');
  return dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
}

bool is_absolute(const std::string& path) { return !path.empty() && path[0] == '/'; }

}  // namespace gpt2::files
