"""Every example of docs/serve.md runs: `temper serve` (the real CLI, in a subprocess, on a tiny
model served under the docs' model name, with an operator token in $TEMPER_ADMIN_TOKEN and the
docs' checkpoint folder as its weights folder), then each curl and Python block against it."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from serve_helpers import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "docs-operator-token"
DOC = ROOT / "docs" / "serve.md"
BLOCK = re.compile(r"```(bash|python)\n(.*?)```", re.S)


def blocks() -> list[tuple[str, str]]:
    found = [(lang, code) for lang, code in BLOCK.findall(DOC.read_text())]
    return [(lang, code) for lang, code in found if not code.startswith("temper serve")]


@pytest.fixture(scope="module")
def docs_server(tiny_model_dir, tiny_model_dir_b, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("docs")
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TEMPER_ADMIN_TOKEN": TOKEN}
    cmd = [sys.executable, "-m", "temper", "serve", "--model", str(tiny_model_dir), "--port", str(port),
           "--set", "served_name=smollm2-135m", "--set", f"usage.path={tmp / 'usage.jsonl'}",
           "--set", "admin_token_env=TEMPER_ADMIN_TOKEN", "--set", f"weights_dirs=[{tiny_model_dir_b.parent}]"]
    proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline()  # the ready line comes before uvicorn starts listening
        assert line.startswith("serving smollm2-135m (smollm2-135m, smollm2-135m:fast, smollm2-135m:auto) on http://"
                               f"127.0.0.1:{port}/v1"), line
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "temper serve did not come up"
            time.sleep(0.2)
        yield port, tmp
    finally:
        proc.terminate()  # SIGTERM: graceful shutdown; uvicorn re-raises the signal once it has stopped
        assert proc.wait(timeout=60) in (0, -15)
        rest = proc.stdout.read()
        assert "Traceback" not in rest, rest


def test_the_docs_have_examples():
    langs = [lang for lang, _ in blocks()]
    assert langs.count("bash") >= 4 and langs.count("python") >= 2


@pytest.mark.parametrize("index", range(len(blocks())))
def test_docs_example_runs(docs_server, tiny_model_dir_b, index):
    port, tmp = docs_server
    lang, code = blocks()[index]
    code = code.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    env = {**os.environ, "CHECKPOINT": str(tiny_model_dir_b), "HF_HUB_OFFLINE": "1", "TEMPER_ADMIN_TOKEN": TOKEN,
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    cmd = ["bash", "-euo", "pipefail", "-c", code] if lang == "bash" else [sys.executable, "-c", code]
    out = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, f"{lang} block {index} failed:\n{code}\n--- output:\n{out.stdout}\n{out.stderr}"
    assert out.stdout.strip(), f"{lang} block {index} printed nothing"
    assert '"error"' not in out.stdout, out.stdout
