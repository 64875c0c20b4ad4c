"""The baselines of benchmarks/stream_overhead.py: what a person would write by hand to
stream one chat completion — a plain httpx script printing each token as it arrives,
with the synchronous client (the default) or, with `--async`, an `httpx.AsyncClient` (as
awf streams, on an event loop).

    python benchmarks/bare_client.py BASE_URL [--async]
"""

import asyncio
import json
import sys

import httpx

body = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def show(line: str) -> None:
    if line.startswith("data: ") and line != "data: [DONE]":
        choices = json.loads(line[6:]).get("choices")
        if choices and choices[0]["delta"].get("content"):
            print(choices[0]["delta"]["content"], end="", flush=True)


async def stream_async(url: str) -> None:
    async with (
        httpx.AsyncClient(timeout=60) as client,
        client.stream("POST", url, json=body) as response,
    ):
        async for line in response.aiter_lines():
            show(line)


def stream(url: str) -> None:
    with httpx.Client(timeout=60) as client, client.stream("POST", url, json=body) as response:
        for line in response.iter_lines():
            show(line)


if __name__ == "__main__":
    url = f"{sys.argv[1]}/chat/completions"
    if "--async" in sys.argv[2:]:
        asyncio.run(stream_async(url))
    else:
        stream(url)
    print()
