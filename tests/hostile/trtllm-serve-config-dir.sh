# Hostile: --config naming a directory
trtllm-serve meta-llama/Llama-3.1-8B-Instruct --config /tmp
