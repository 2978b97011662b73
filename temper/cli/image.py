"""`temper image build | load | pull | ls | rm | prune`: task images, built without a daemon and kept by content."""

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.status import Status
from rich.table import Table

from temper.cli.common import ConfigOption, SetOption, resolve_config
from temper.envs.taskfolder import find_task_folders
from temper.images import Image, ImagesConfig, ImageStore
from temper.images.bases import describe

console = Console(stderr=True)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _said(image: Image, store: ImageStore) -> None:
    how = "cached" if image.key not in store.built else f"built in {image.build_s:.1f} s" if image.build_s else "stored"
    subs = "".join(f"; FROM {k} -> {v}" for k, v in image.substitutions.items())
    console.print(f"{image.name}: image {image.key[:12]} ({how}, {len(image.layers)} layers{subs})")


def register(app: typer.Typer) -> None:
    image = typer.Typer(help="Task images: build Dockerfiles without a daemon, load archives, list, remove.",
                        no_args_is_help=True)

    @image.command("build")
    def build(
        folders: Annotated[list[Path], typer.Argument(help="Task folders (or folders holding task folders).")],
        config: ConfigOption = None,
        sets: SetOption = None,
    ) -> None:
        """Build the image of every task folder with an environment/Dockerfile (once: kept by content)."""
        store = ImageStore(resolve_config(ImagesConfig, config, sets))
        tasks = [t for f in folders for t in find_task_folders(f) if (t / "environment" / "Dockerfile").is_file()]
        if not tasks:
            where = ", ".join(map(str, folders))
            raise typer.BadParameter(f"no task folder with an environment/Dockerfile under {where}")
        for task in tasks:
            with Status(f"{task.name}: building", console=console) as status:
                img = store.build_task(task, on_line=lambda line, s=status, n=task.name: s.update(f"{n}: {line[:100]}"))
            _said(img, store)

    @image.command("base")
    def base(refs: Annotated[list[str], typer.Argument(help="FROM names, e.g. python:3.13-slim-bookworm.")],
             config: ConfigOption = None, sets: SetOption = None) -> None:
        """Build ahead the Debian bases these FROM names map to (mmdebstrap, from Debian's archive; once)."""
        store = ImageStore(resolve_config(ImagesConfig, config, sets))
        for ref in refs:
            with Status(f"{ref}: building its base with mmdebstrap", console=console):
                local, spec = store.base_for(ref)
            typer.echo(f"{ref}: {local} ({describe(spec)})")

    @image.command("load")
    def load(archive: Annotated[Path, typer.Argument(help="A docker save / podman save archive (tar).")],
             config: ConfigOption = None, sets: SetOption = None) -> None:
        """Add an image from a saved archive (Docker or OCI format)."""
        store = ImageStore(resolve_config(ImagesConfig, config, sets))
        _said(store.load(archive), store)

    @image.command("pull")
    def pull(ref: Annotated[str, typer.Argument(help="An image name a reachable registry serves.")],
             config: ConfigOption = None, sets: SetOption = None) -> None:
        """Add an image by name, pulled by the build tool."""
        store = ImageStore(resolve_config(ImagesConfig, config, sets))
        _said(store.pull(ref), store)

    @image.command("ls")
    def ls(config: ConfigOption = None, sets: SetOption = None) -> None:
        """List the stored images with their disk use (layers shared between images counted once below)."""
        store = ImageStore(resolve_config(ImagesConfig, config, sets))
        use = store.disk_use()
        table = Table("key", "name", "source", "layers", "size", "created", "FROM substituted", box=None)
        for img in store.images():
            table.add_row(img.key[:12], img.name, img.source, str(len(img.layers)), _size(use[f"image:{img.key}"]),
                          time.strftime("%Y-%m-%d %H:%M", time.localtime(img.created)),
                          ", ".join(f"{k} -> {v}" for k, v in img.substitutions.items()))
        Console(width=200).print(table)
        typer.echo(f"disk: layers {_size(use['layers'])} (each once), bases {_size(use['bases'])}, "
                   f"build tool {_size(use['podman'])}; store {store.root}")

    @image.command("rm")
    def rm(refs: Annotated[list[str], typer.Argument(help="Image keys (or a prefix) or names.")],
           config: ConfigOption = None, sets: SetOption = None) -> None:
        """Forget images (their layers go at the next prune, unless another image uses them)."""
        store = ImageStore(resolve_config(ImagesConfig, config, sets))
        for ref in refs:
            for img in store.remove(ref):
                typer.echo(f"removed {img.key[:12]} ({img.name})")

    @image.command("prune")
    def prune(config: ConfigOption = None, sets: SetOption = None) -> None:
        """Delete layers no image uses, base tarballs and the build tool's cache."""
        freed = ImageStore(resolve_config(ImagesConfig, config, sets)).prune()
        typer.echo(f"freed {_size(freed)}")

    app.add_typer(image, name="image")
