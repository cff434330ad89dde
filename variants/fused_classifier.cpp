#include "variants/all.h"

// Tokens per chunk (settings.classifier_chunk, 1,024 unless the profile says): a chunk's logits at GPT-2's padded
// vocabulary are 1024 × 50304 × 2 bytes = 103 MB in bf16, against 1.65 GB (B=16, T=1024) for the whole step's
// logits, and as many again for their gradient. Larger chunks: fewer fp32 read-modify-writes of the head's
// gradient (one a chunk, 154 MB at GPT-2's size), more memory.
const gpt2::Variant gpt2::variants::fused_classifier{.name = "fused_classifier", .kind = VariantKind::kExtra,
    .why = "LM head + cross-entropy + its gradient in one pass per chunk of tokens (our CUDA kernel; ATen "
           "elsewhere): the full logits and their gradient are never in memory",
    .source = "llm.c's fused classifier; Liger-Kernel's fused linear cross-entropy",
    .apply = [](StepSpec& s) {
      s.model.classifier_chunk = s.settings.classifier_chunk;
      use_classifier_kernel(s.model, s.settings.classifier_kernel);  // fastest: choosers.h
    }};
