"""The real SmolLM2-135M-Instruct behind `temper serve`: greedy outputs of `M` and `M:fast` are
identical through the openai client, and the fast variant really speculates (accepted drafts)."""

import httpx
import pytest
from serve_helpers import LiveServer, metric, serve_config

pytestmark = pytest.mark.e2e

PROMPTS = [
    "Repeat this sentence exactly: The mitochondria is the powerhouse of the cell, and it makes ATP for the body.",
    "Fix the spelling in this line and write it out again: 'The quick brown fox jumpd over the lazzy dog.'",
    "def add(a, b):\n    return a + b\n\nRewrite the function above with type hints.",
]


@pytest.mark.slow
def test_smollm2_fast_variant_is_greedy_identical(smollm2_path, tmp_path):
    cfg = serve_config(smollm2_path, tmp_path, served_name="smollm2")
    with LiveServer(cfg) as srv:
        client = srv.client()
        for prompt in PROMPTS:
            kw = dict(messages=[{"role": "user", "content": prompt}], max_tokens=40, temperature=0)
            std = client.chat.completions.with_raw_response.create(model="smollm2", **kw)
            fast = client.chat.completions.with_raw_response.create(model="smollm2:fast", **kw)
            assert (std.headers["x-variant"], fast.headers["x-variant"]) == ("standard", "fast")
            assert fast.parse().choices[0].message.content == std.parse().choices[0].message.content
        text = httpx.get(f"{srv.url}/metrics").text
    assert metric(text, "temper_engine_accepted_draft_tokens_total") > 0
