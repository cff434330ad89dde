// defines: PairPipes — the two pipes of paired timing (docs/reference-rungs.md) between gpt2bench and a reference's
//          Python process: gpt2bench asks for one repetition at a time ("rep"), the script answers with its
//          seconds a step; between its answers gpt2bench times its own C++ rung's repetitions.
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>

namespace gpt2 {

class PairPipes {
 public:
  PairPipes();  // throws std::runtime_error where the pipes cannot be made
  ~PairPipes();
  PairPipes(const PairPipes&) = delete;
  PairPipes& operator=(const PairPipes&) = delete;

  // The child's ends (it reads the asks, writes the answers): the script's config names them (`pair_fds`).
  std::pair<int, int> child_fds() const { return {asks_[0], answers_[1]}; }
  void in_child();   // after fork, in the child: the parent's ends closed
  void in_parent();  // after fork, in the parent: the child's ends closed

  // Whether `child` said "ready" (false: it ended, or closed its end, first).
  bool ready(pid_t child);
  // One repetition asked of `child` and its seconds a step; throws where the child ends without answering.
  double repetition(pid_t child);
  void end();  // "end" told and the asking end closed: the script writes its result and exits

 private:
  int asks_[2] = {-1, -1}, answers_[2] = {-1, -1};
  std::string pending_;  // read past the last line
  std::optional<std::string> line(pid_t child);  // the child's next line; none where it ended or closed its end
};

}  // namespace gpt2
