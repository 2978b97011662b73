// Loads model-lite.obj, writes its triangle count into #faces and its bounding box into #bbox, and draws its
// edges seen from the front (x right, y up) on the canvas.
function bounds(vertices) {
  const min = [Infinity, Infinity, Infinity];
  const max = [-Infinity, -Infinity, -Infinity];
  for (const v of vertices) {
    for (let a = 0; a < 3; a++) {
      min[a] = Math.min(min[a], v[a]);
      max[a] = Math.max(max[a], v[a]);
    }
  }
  return { min, max };
}

function draw(mesh, box) {
  const canvas = document.getElementById("view");
  const ctx = canvas.getContext("2d");
  const scale = 0.9 * Math.min(canvas.width / (box.max[0] - box.min[0]), canvas.height / (box.max[1] - box.min[1]));
  const cx = (box.min[0] + box.max[0]) / 2;
  const cy = (box.min[1] + box.max[1]) / 2;
  const at = (v) => [canvas.width / 2 + (v[0] - cx) * scale, canvas.height / 2 - (v[1] - cy) * scale];
  ctx.strokeStyle = "#1b4965";
  ctx.lineWidth = 0.5;
  ctx.beginPath();
  for (const t of mesh.triangles) {
    const [a, b, c] = t.map((i) => at(mesh.vertices[i]));
    ctx.moveTo(...a);
    ctx.lineTo(...b);
    ctx.lineTo(...c);
    ctx.closePath();
  }
  ctx.stroke();
}

fetch("model-lite.obj")
  .then((res) => {
    if (!res.ok) throw new Error(`model-lite.obj: HTTP ${res.status}`);
    return res.text();
  })
  .then((text) => {
    const mesh = parseOBJ(text);
    const box = bounds(mesh.vertices);
    const fmt = (p) => p.map((x) => x.toFixed(3)).join(" ");
    document.getElementById("faces").textContent = String(mesh.triangles.length);
    document.getElementById("bbox").textContent = `${fmt(box.min)} / ${fmt(box.max)}`;
    draw(mesh, box);
  });
