vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-batched-tokens 1e300
