export VLLM_ALL2ALL_BACKEND='ＤＥＥＰＥＰ'
vllm serve deepseek-ai/DeepSeek-V3 -tp 8 --enable-expert-parallel
