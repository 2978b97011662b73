"""An external agent program on a web task: TEMPER_RENDER_URL renders its page in the task image's Chromium and
returns the description a text-only model reads and the screenshot itself, a PNG data URL for a model that takes
images; the program checks the page's pixels, temper's text-only endpoint refuses the image part with a 400, and
the verifier scores the page."""

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from temper.agent.config import AgentConfig
from temper.envs import parse_spec
from temper.episode_runner import run_episode

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "envs" / "web"
SOLUTION = (EXAMPLE / "web-status-badge" / "solution" / "solve.sh").read_text()
PAGE = SOLUTION.split("<<'HTML'\n", 1)[1].split("\nHTML", 1)[0]


def test_an_external_program_gets_the_rendered_page_as_text_and_as_an_image(tiny_engine, smollm2_tokenizer,
                                                                            program, tmp_path):
    if not (shutil.which("podman") and shutil.which("mmdebstrap")):  # scripts/setup.sh --with-images
        pytest.fail("podman and mmdebstrap are needed: bash scripts/setup.sh --with-images", pytrace=False)
    suite = parse_spec(f"web:path={EXAMPLE}")
    (task,) = suite.tasks()  # builds the task's image (once; kept by content)
    dump = tmp_path / "seen.json"
    argv = program(f"""
    import base64, io, json, os, re
    import httpx, openai
    from PIL import Image
    auth = {{"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}}
    def post(url, **body):
        return httpx.post(url, json=body, headers=auth, timeout=120)
    post(os.environ["TEMPER_FILES_URL"] + "/write", path="/app/index.html", content={PAGE!r}).raise_for_status()
    shown = post(os.environ["TEMPER_RENDER_URL"], page="index.html", width=800).json()
    x, y, w, h = map(int, re.search(r'div#badge "All systems go" at \\((\\d+),(\\d+)\\) (\\d+)x(\\d+)',
                                    shown["text"]).groups())
    head, data = shown["image"].split(",", 1)
    img = Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")
    client = openai.OpenAI(max_retries=0)
    parts = [{{"type": "text", "text": "Is the badge green?"}},
             {{"type": "image_url", "image_url": {{"url": shown["image"]}}}}]
    try:
        client.chat.completions.create(model="any", messages=[{{"role": "user", "content": parts}}])
        refused = None
    except openai.BadRequestError as exc:
        refused = str(exc)
    client.chat.completions.create(model="any", messages=[{{"role": "user", "content": shown["text"]}}])
    narrow = post(os.environ["TEMPER_RENDER_URL"], width=10)
    json.dump({{"exit_code": shown["exit_code"], "head": head, "size": img.size, "box": [x, y, w, h],
               "inside": img.getpixel((x + 4, y + 4)), "outside": img.getpixel((max(0, x - 20), y + 4)),
               "refused": refused, "narrow": [narrow.status_code, narrow.text]}}, open({str(dump)!r}, "w"))
    """)
    cfg = AgentConfig(kind="external", command=argv, max_turn_tokens=8)
    res = asyncio.run(run_episode(tiny_engine, smollm2_tokenizer, suite, task, None, cfg, 0))
    seen = json.loads(dump.read_text())
    assert seen["exit_code"] == 0 and seen["head"] == "data:image/png;base64" and seen["size"][0] == 800
    x, _, w, h = seen["box"]
    assert abs(x + w / 2 - 400) <= 1 and h >= 40  # centred in 800 px, as the text describes it
    assert seen["inside"] == [0x1E, 0x84, 0x49] and seen["outside"] == [255, 255, 255]  # the image is that page
    assert "400" in seen["refused"] and "part 1 is of type 'image_url'" in seen["refused"]  # a text-only model
    assert seen["narrow"][0] == 400 and "width" in seen["narrow"][1]
    assert res.failure is None and res.reward.value == 1.0, res.reward
    (traj,) = res.trajectories
    (render,) = [a for a in traj.info["actions"] if a["name"] == "render"]  # the action is in the episode's record
    assert render["arguments"] == {"page": "index.html", "width": 800} and not render["error"]
