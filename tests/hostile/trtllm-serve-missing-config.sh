# Hostile: trtllm-serve reading a config file that is not here
trtllm-serve meta-llama/Llama-3.1-8B-Instruct --tp_size 1 --extra_llm_api_options /nonexistent/spectune-trtllm.yaml
