#include "variants/all.h"

// Tokens per chunk: a chunk's logits at GPT-2's padded vocabulary are 1024 × 50304 × 2 bytes = 103 MB in bf16,
// against 1.65 GB (B=16, T=1024) for the whole step's logits, and as many again for their gradient.
const gpt2::Variant gpt2::variants::fused_classifier{.name = "fused_classifier", .kind = VariantKind::kExtra,
    .why = "LM head + softmax cross-entropy + its gradient in one pass per 1,024-token chunk (our CUDA kernel; ATen "
           "elsewhere): the full logits and their gradient are never in memory",
    .source = "llm.c's fused classifier; Liger-Kernel's fused linear cross-entropy",
    .apply = [](StepSpec& s) { s.model.classifier_chunk = 1024; }};
