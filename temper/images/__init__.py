"""Task images: Dockerfiles built without a daemon (podman, or docker where a daemon runs), base images built
from Debian's archive where no registry answers, and a store that unpacks each layer once for every
sandbox of the image to share read-only."""

from temper.images.builder import ImageBuildError
from temper.images.config import BaseImage, ImagesConfig
from temper.images.store import Image, ImageNotFound, ImageStore

__all__ = ["BaseImage", "Image", "ImageBuildError", "ImageNotFound", "ImageStore", "ImagesConfig"]
