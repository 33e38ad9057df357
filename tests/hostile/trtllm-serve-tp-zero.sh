# Hostile: --tp_size 0
trtllm-serve meta-llama/Llama-3.1-8B-Instruct --tp_size 0 --config trtllm-valid.yaml
