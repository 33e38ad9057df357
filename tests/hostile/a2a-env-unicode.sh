export VLLM_ALL2ALL_BACKEND='ＤＥＥＰＥＰ'
vllm serve deepseek-ai/DeepSeek-V3 -dp 8 --enable-expert-parallel
