# SGLang with an adaptive config whose second key has 5,000 digits
python -m sglang.launch_server --model-path llama-3.1-8b --speculative-algorithm EAGLE \
  --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 \
  --speculative-adaptive --speculative-adaptive-config adaptive-huge-key.json
