# the speculative settings are in a --config file that is a device
vllm serve meta-llama/Llama-3.1-8B-Instruct --config /dev/zero
