"""A GGUF conversion killed after writing its files but before its completion marker (holding the lock) is
never loaded: the next command takes the lock over, removes the half folder, converts anew and loads a
model whose logits equal the original's; a command waiting on a live converter says so and gives up after
TEMPER_LOCK_TIMEOUT_S in one line. TEMPER_HOME is a temporary folder."""

import re
import sys
from pathlib import Path

import pytest
import torch
from interrupt_helpers import env, kill, kill_at_pause, python, run, start
from tiny_gguf import tiny_vocab, write_tiny_gguf

from temper.firsttime import MARKER
from temper.models import load_model
from temper.models.registry import user_gguf_name

RESOLVE = "import logging, sys; logging.basicConfig(level=logging.INFO, format='%(message)s'); " \
          "from temper.models import resolve_model; print('folder:', resolve_model(sys.argv[1]))"


@pytest.mark.timeout(300)
def test_a_conversion_killed_before_its_marker_is_converted_anew(tiny_llama, tmp_path, monkeypatch):
    model = tiny_llama("llama", vocab_size=len(tiny_vocab()))
    gguf = write_tiny_gguf(tmp_path / "tiny.gguf", model)
    home = tmp_path / "home"
    monkeypatch.setenv("TEMPER_HOME", str(home))
    folder = home / "models" / user_gguf_name(gguf)
    first = start([*python(RESOLVE), str(gguf)], env(TEMPER_HOME=str(home),
                                                      TEMPER_TEST_PAUSE_AT=f"the converted model {folder.name}"))
    kill_at_pause(first, timeout=120)
    half = [p for p in (home / "models").iterdir() if p.name.startswith(".tmp-")]
    assert half and (half[0] / "model.safetensors").is_file() and not (half[0] / MARKER).exists()

    out = run([*python(RESOLVE), str(gguf)], env(TEMPER_HOME=str(home)), timeout=120).stdout
    assert re.search(rf"taking over .* from pid {first.pid} .*which is gone", out), out
    assert "left by an interrupted build" in out, out
    assert f"folder: {folder}" in out, out
    assert sorted(p.name for p in (home / "models").iterdir()) == [folder.name, f"{folder.name}.lock"]
    ids = torch.randint(0, len(tiny_vocab()), (20,))
    with torch.no_grad():
        assert torch.allclose(model.logits(ids), load_model(folder).model.logits(ids), atol=1e-6)



@pytest.mark.timeout(300)
def test_a_command_waiting_on_a_live_converter_names_it_and_gives_up_in_one_line(tiny_llama, tmp_path):
    gguf = write_tiny_gguf(tmp_path / "tiny.gguf", tiny_llama("llama", vocab_size=len(tiny_vocab())))
    home = tmp_path / "home"
    name = f"the converted model {user_gguf_name(gguf)}"
    holder = start([*python(RESOLVE), str(gguf)], env(TEMPER_HOME=str(home), TEMPER_TEST_PAUSE_AT=name))
    try:
        while "temper: paused at" not in (line := holder.stdout.readline()):  # then alive, holding the lock
            assert line, "the converter exited"
        temper = str(Path(sys.executable).with_name("temper"))
        waiter = run([temper, "generate", "--model", str(gguf), "--prompt", "hi"],
                     env(TEMPER_HOME=str(home), TEMPER_LOCK_TIMEOUT_S="3", COLUMNS="500"), timeout=200)
    finally:
        kill(holder)
    lines = waiter.stdout.strip().splitlines()
    assert waiter.returncode == 1 and "Traceback" not in waiter.stdout, waiter.stdout
    assert any(f"waiting for {name}" in line and f"held by pid {holder.pid} on" in line for line in lines), lines
    assert re.fullmatch(rf"error: {name}: gave up after 3 s waiting for \S+\.lock, held by pid {holder.pid} on "
                        r".*\(TEMPER_LOCK_TIMEOUT_S sets the wait; `temper doctor` reports it\)", lines[-1]), lines
