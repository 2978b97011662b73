// A small Wavefront OBJ reader: `v x y z` vertices and `f a b c ...` faces (indices 1-based or negative,
// `a/t/n` forms allowed); a polygon of n corners counts as n - 2 triangles. Everything else is skipped.
function parseOBJ(text) {
  const vertices = [];
  const triangles = [];
  for (const line of text.split(/\r?\n/)) {
    const parts = line.trim().split(/\s+/);
    if (parts[0] === "v") {
      vertices.push(parts.slice(1, 4).map(Number));
    } else if (parts[0] === "f") {
      const idx = parts.slice(1).map((p) => {
        const i = parseInt(p.split("/")[0], 10);
        return i < 0 ? vertices.length + i : i - 1;
      });
      for (let k = 1; k + 1 < idx.length; k++) triangles.push([idx[0], idx[k], idx[k + 1]]);
    }
  }
  return { vertices, triangles };
}
