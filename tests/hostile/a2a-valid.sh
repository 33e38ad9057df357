vllm serve deepseek-ai/DeepSeek-V3 -dp 8 --enable-expert-parallel --all2all-backend deepep_low_latency --speculative-config '{"method": "mtp", "num_speculative_tokens": 2}'
