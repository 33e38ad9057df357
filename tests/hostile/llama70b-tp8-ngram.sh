# The wrong deployment: Llama-3.1-70B at TP8 with n-gram, gated against a Qwen3-8B profile
vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 8 \
  --speculative-config '{"method": "ngram", "num_speculative_tokens": 3}'
