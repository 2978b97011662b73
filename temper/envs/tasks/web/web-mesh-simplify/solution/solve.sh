#!/bin/bash
set -e
cd /app
python3 - <<'PY'
import trimesh

mesh = trimesh.load("model.obj", force="mesh")
lite = mesh.simplify_quadric_decimation(face_count=1800)
assert lite.is_watertight and len(lite.faces) <= 2000
lite.export("model-lite.obj", include_normals=False)
print(len(lite.faces), "faces, volume", lite.volume / mesh.volume)
PY
