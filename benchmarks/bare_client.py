"""The baseline of benchmarks/stream_overhead.py: what a person would write by hand to
stream one chat completion — a plain synchronous httpx script printing each token as it
arrives.

    python benchmarks/bare_client.py BASE_URL
"""

import json
import sys

import httpx

body = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
with (
    httpx.Client(timeout=60) as client,
    client.stream("POST", f"{sys.argv[1]}/chat/completions", json=body) as response,
):
    for line in response.iter_lines():
        if line.startswith("data: ") and line != "data: [DONE]":
            choices = json.loads(line[6:]).get("choices")
            if choices and choices[0]["delta"].get("content"):
                print(choices[0]["delta"]["content"], end="", flush=True)
print()
