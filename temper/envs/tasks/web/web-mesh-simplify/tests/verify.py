"""Load model-lite.obj with trimesh and score it against the shipped model's numbers (face budget, closed, volume,
bounding box), then render viewer.html and check the face count it shows, one component each."""

import numpy as np
import trimesh

import webcheck

MOST_FACES = 2000
VOLUME = 1.909744081814333  # model.obj as shipped
BOUNDS = np.array([[-1.2097, -0.7783, -0.5525], [1.2635, 0.7783, 0.4948]])


def load() -> trimesh.Trimesh | None:
    try:
        mesh = trimesh.load("/app/model-lite.obj", file_type="obj", force="mesh", process=False)
    except Exception:
        return None
    return mesh if isinstance(mesh, trimesh.Trimesh) and len(mesh.faces) > 0 else None


def check(c: webcheck.Checks) -> None:
    mesh = load()
    if mesh is not None:
        c.score("face_budget", len(mesh.faces) <= MOST_FACES)
        merged = mesh.copy()
        merged.merge_vertices(merge_tex=True, merge_norm=True)
        c.score("watertight", merged.is_watertight)
        c.score("volume", abs(abs(merged.volume) / VOLUME - 1) <= 0.03)
        extents = BOUNDS[1] - BOUNDS[0]
        c.score("bbox", bool(np.all(np.abs(mesh.bounds - BOUNDS) <= 0.02 * extents)))
    page = c.open("viewer.html", width=800, height=700)
    c.wait_for(page, "document.getElementById('faces')?.textContent.trim() !== ''")
    c.screenshot(page)
    shown = page.evaluate("document.getElementById('faces')?.textContent.trim() ?? ''")
    c.score("viewer_faces", mesh is not None and shown == str(len(mesh.faces)))


webcheck.run(["face_budget", "watertight", "volume", "bbox", "viewer_faces", "no_console_errors"], check)
